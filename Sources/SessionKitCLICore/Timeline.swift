import Foundation
import SessionKit

/// `sessionkit timeline`: a captured stream of SessionKit's diagnostic events (JSON lines, as
/// `Diagnostics.lines(format: .jsonLines)` writes them) printed as a timeline a person can read, from the first
/// event on: when, whose, and what happened in words.
enum Timeline {
    /// The timeline of the JSON lines in `text`, and how many non-empty lines were not events (skipped).
    ///
    /// - Parameter text: The captured stream.
    /// - Returns: One line per event, in the order given, and the count of lines skipped.
    static func render(_ text: String) -> (lines: [String], skipped: Int) {
        var events: [DiagnosticEvent] = []
        var skipped = 0
        for line in text.split(whereSeparator: \.isNewline) where !line.allSatisfy(\.isWhitespace) {
            if let event = DiagnosticEvent(jsonLine: String(line)) { events.append(event) } else { skipped += 1 }
        }
        guard let start = events.first?.time else { return ([], skipped) }
        let lines = events.map { event in
            let offset = event.time.timeIntervalSince(start)
            let when = String(format: "+%8.3fs", offset)
            let who = event.account?.subject ?? "-"
            return "\(when)  \(pad(event.level.description, 7))  \(pad(who, 12))  \(phrase(event))"
        }
        return (lines, skipped)
    }

    /// What the event says, in words.
    static func phrase(_ event: DiagnosticEvent) -> String {
        let field = { (name: String) in event.fields[name] ?? "?" }
        let cause = event.fields["cause"].map { " (\($0))" } ?? ""
        switch event.kind {
        case .stateChanged: return "state \(field("from")) → \(field("to"))"
        case .refreshStarted: return "refresh started\(cause)"
        case .refreshJoined: return "joined the refresh in flight\(cause)"
        case .refreshSucceeded: return "refresh succeeded in \(field("milliseconds")) ms\(cause)"
        case .refreshAdopted:
            return
                "adopted the tokens another process refreshed, after \(field("milliseconds")) ms\(cause); nothing sent"
        case .refreshFailed:
            return "refresh failed: \(field("code")) after \(field("milliseconds")) ms\(cause); still signed in"
        case .refreshRejected:
            let oauth = event.fields["oauthError"].map { ", \($0)" } ?? ""
            return "refresh rejected: \(field("code"))\(oauth) after \(field("milliseconds")) ms\(cause); "
                + "sign-in required"
        case .loopGuardTripped:
            return "loop guard: \(field("refreshes")) refreshes within \(field("window")) ms; another refused"
        case .refreshStoredAfterEnd:
            return "the session ended while its token request was out; the rotation it brought: \(field("outcome"))"
        case .lockWaited: return "waited \(field("milliseconds")) ms for the cross-process refresh lock"
        case .restoreFinished:
            var text = "restore: \(field("outcome"))"
            if let reason = event.fields["reason"] { text += " (\(reason))" }
            if let accounts = event.fields["accounts"] { text += ", \(accounts) account(s)" }
            if let code = event.fields["code"] { text += ", \(code)" }
            if let unreadable = event.fields["unreadable"] { text += ", \(unreadable) unreadable now" }
            return text
        case .sessionLoaded: return "loaded the account's session from the store for a request"
        case .storeRetry: return "the store is still unreadable (try \(field("attempt"))); trying again later"
        case .storageFailed: return "credentials could not be stored: \(field("code")); kept in memory"
        case .storedAfterRetry: return "credentials stored once the store opened"
        case .signOutStep: return "sign-out step \(field("step")): \(field("outcome"))"
        case .crossProcessNotice:
            return event.fields["from"] == "this_process"
                ? "this process announced a change to the shared store"
                : "another process changed the shared store"
        case .crossProcessReconciled:
            return
                "sessions checked against the shared store: \(field("ended")) of \(field("checked")) found signed out"
        case .signedOutElsewhere: return "signed out in another process; the session here ended"
        case .accountEnded:
            return "the provider ended the account (\(field("reason"))): \(field("sessions")) session(s) here, "
                + "record \(field("record"))"
        case .appleIDChecked: return "Sign in with Apple credential state: \(field("state"))"
        case .backChannelLogout:
            let check = event.fields["check"].map { " (\($0))" } ?? ""
            return "back-channel logout token \(field("outcome"))\(check) by \(field("by")); "
                + "\(field("ended")) account(s) ended"
        case .requestRefusedAfterEnd: return "a \(field("method")) request was refused: its session had ended"
        case .credentialsWithheld:
            return "redirect \(field("status")) from \(field("from")) to \(field("to")): credentials withheld"
        case .redirectRefused:
            return "redirect \(field("status")) from \(field("from")) to \(field("to")) refused: \(field("code"))"
        case .dpopNonceRetry:
            return "the \(field("endpoint")) at \(field("origin")) asked for a DPoP nonce; sent once more with it"
        }
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// Runs the command: reads the file (or standard input), prints the timeline.
    static func run(_ options: TimelineOptions, console: Console) -> ExitCode {
        var text = ""
        if let path = options.file {
            guard let contents = FileManager.default.contents(atPath: path) else {
                console.error("cannot read the file given to timeline")
                return .failure
            }
            text = String(decoding: contents, as: UTF8.self)
        } else {
            while let line = console.readLine() { text += line + "\n" }
        }
        let (lines, skipped) = render(text)
        guard !lines.isEmpty else {
            console.error(
                "no SessionKit diagnostic events in the input (JSON lines, Diagnostics.lines(format: .jsonLines))")
            return .failure
        }
        for line in lines { console.print(line) }
        if skipped > 0 { console.error("\(skipped) line(s) were not diagnostic events and were skipped") }
        return .ok
    }
}
