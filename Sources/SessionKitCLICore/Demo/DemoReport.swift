import Foundation
import SessionKit

/// The demo's output: an 80-column table for people, or one line of JSON for programs.
enum DemoReport {
    /// `{"seed":…,"totals":{"scenarios":…,"naiveLeaked":…,"sessionkitLeaked":…},"scenarios":[{"id":…,
    /// "naive":{"leaked":…,"detail":…},"sessionkit":{…}},…]}`, members in that order.
    ///
    /// - Parameters:
    ///   - results: The rows.
    ///   - seed: The seed of the randomized scenario.
    /// - Returns: The JSON text, without a final line break.
    static func json(_ results: [ScenarioResult], seed: UInt64) -> String {
        func verdict(_ verdict: Verdict) -> String {
            #"{"leaked":\#(verdict.leaked),"detail":\#(JSONValue.quoted(verdict.detail))}"#
        }
        let rows = results.map { result in
            #"{"id":\#(JSONValue.quoted(result.id)),"naive":\#(verdict(result.naive)),"sessionkit":\#(verdict(result.sessionKit))}"#
        }
        let totals =
            #"{"scenarios":\#(results.count),"naiveLeaked":\#(results.filter(\.naive.leaked).count),"#
            + #""sessionkitLeaked":\#(results.filter(\.sessionKit.leaked).count)}"#
        return #"{"seed":\#(seed),"totals":\#(totals),"scenarios":[\#(rows.joined(separator: ","))]}"#
    }

    /// The table: one row per scenario with each side's verdict, then what each side did, scenario by scenario.
    ///
    /// - Parameters:
    ///   - results: The rows.
    ///   - colour: Whether to colour the verdicts.
    /// - Returns: The table and the details, without a final line break.
    static func table(_ results: [ScenarioResult], colour: Bool) -> String {
        func verdict(_ verdict: Verdict) -> String { verdict.leaked ? "LEAKED" : "ok" }
        let summary = TextLayout.table(
            header: ["scenario", "naive", "sessionkit"],
            rows: results.map { [$0.id, verdict($0.naive), verdict($0.sessionKit)] },
            widths: [30, 8, 10]
        ) { _, column, line in
            guard column > 0 else { return line }
            return TextLayout.colour(line, line == "LEAKED" ? 31 : 32, enabled: colour)
        }
        var lines = [summary, "", "What happened:"]
        for result in results {
            lines.append(result.id)
            lines.append(
                TextLayout.paragraph(
                    result.naive.detail, indent: String(repeating: " ", count: 14), first: "  naive:      "))
            lines.append(
                TextLayout.paragraph(
                    result.sessionKit.detail, indent: String(repeating: " ", count: 14), first: "  sessionkit: "))
        }
        return lines.joined(separator: "\n")
    }

    /// What the table prints after the rows: the logout-in-flight arithmetic and the verdict.
    ///
    /// - Parameters:
    ///   - results: The rows.
    ///   - seed: The seed used.
    ///   - elapsed: How long the demo took.
    /// - Returns: The lines.
    static func footer(_ results: [ScenarioResult], seed: UInt64, elapsed: Duration) -> String {
        let naiveLeaks = results.filter(\.naive.leaked).count
        let sessionKitLeaks = results.filter(\.sessionKit.leaked).count
        var lines: [String] = []
        if results.contains(where: { $0.id == LogoutInFlightScenario.id }) {
            let chance = Int((ArrivalSchedule.chanceNothingInFlight * 100).rounded())
            lines.append(
                TextLayout.paragraph(
                    "logout-in-flight: λ = 2 requests/s, W = 600 ms, so L = λW = 1.2 requests are in flight on "
                        + "average, and with Poisson arrivals nothing is in flight at only e^-1.2 ≈ \(chance) % of "
                        + "logouts (seed \(seed); change it with --seed).")
            )
        }
        lines.append(
            TextLayout.paragraph(
                "\(DemoSupport.count(results.count, "scenario")) in \(String(format: "%.1f", elapsed.seconds)) s: the "
                    + "naive code leaked in "
                    + "\(naiveLeaks), SessionKit in \(sessionKitLeaks).")
        )
        return lines.joined(separator: "\n")
    }
}
