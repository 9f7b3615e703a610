import Foundation
import SessionKit
import Testing

@testable import SessionKitCLICore

@Suite(.timeLimit(.minutes(5))) struct TextLayoutTests {
    @Test func wrapBreaksAtSpacesAndCutsOnlyLongerWords() {
        #expect(TextLayout.wrap("one two three", width: 7) == ["one two", "three"])
        #expect(TextLayout.wrap("abcdefghij", width: 4) == ["abcd", "efgh", "ij"])
        #expect(TextLayout.wrap("a\nb", width: 10) == ["a", "b"])
        #expect(TextLayout.wrap("", width: 10) == [""])
    }

    @Test func paragraphsFitTheTerminal() {
        let text = String(repeating: "word ", count: 60)
        let paragraph = TextLayout.paragraph(text, indent: "      ", first: "note: ")
        #expect(fitsEightyColumns(paragraph))
        #expect(paragraph.hasPrefix("note: word"))
        #expect(paragraph.split(separator: "\n").dropFirst().allSatisfy { $0.hasPrefix("      word") })
    }

    @Test func tablesAlignTheirColumnsWhateverTheColour() {
        let plain = TextLayout.table(header: ["a", "b"], rows: [["x", "yy"], ["long cell", "z"]], widths: [9, 3])
        #expect(plain == "a          b\n---------  ---\nx          yy\nlong cell  z")
        let coloured = TextLayout.table(header: ["a", "b"], rows: [["x", "yy"]], widths: [9, 3]) { _, _, text in
            TextLayout.colour(text, 31, enabled: true)
        }
        #expect(coloured.hasSuffix("\u{1B}[31mx\u{1B}[0m          \u{1B}[31myy\u{1B}[0m"))
    }

    @Test func whatAServerSentCannotDriveTheTerminal() {
        #expect(TextLayout.printable("max-age=60\u{1B}[2J\u{07}") == "max-age=60?[2J?")
        #expect(TextLayout.printable(String(repeating: "x", count: 300), limit: 10) == "xxxxxxxxx…")
    }

    @Test func aScrubbingConsoleRedactsEverySecretInEverythingWritten() {
        let captured = CapturedConsole()
        let console = captured.console.scrubbing(["short", "short-and-longer"])
        console.print("a short-and-longer b short c")
        console.error("error short")
        #expect(captured.output == "a \(Redaction.redact("short-and-longer")) b \(Redaction.redact("short")) c\n")
        #expect(captured.errors == "sessionkit: error \(Redaction.redact("short"))\n")
    }

    @Test func colourNeedsATerminalAndNoNoColor() {
        #expect(CapturedConsole(isTerminal: true).console.usesColour)
        #expect(!CapturedConsole(isTerminal: false).console.usesColour)
        #expect(!CapturedConsole(environment: ["NO_COLOR": "1"], isTerminal: true).console.usesColour)
        // no-color.org: only a NO_COLOR that is present and not empty disables colour.
        #expect(CapturedConsole(environment: ["NO_COLOR": ""], isTerminal: true).console.usesColour)
        #expect(!CapturedConsole(environment: ["TERM": "dumb"], isTerminal: true).console.usesColour)
    }
}
