import SessionKit

/// Renders results for people (an aligned table) or for tools (JSON).
enum BenchReport {
    /// An aligned table: name, value, unit.
    static func table(_ results: [BenchResult]) -> String {
        let rows = [("name", "value", "unit")] + results.map { ($0.name, format($0.value), $0.unit) }
        let nameWidth = rows.map(\.0.count).max() ?? 0
        let valueWidth = rows.map(\.1.count).max() ?? 0
        return rows.map { name, value, unit in
            name.padding(toLength: nameWidth) + "  " + String(repeating: " ", count: valueWidth - value.count) + value
                + "  " + unit
        }.joined(separator: "\n")
    }

    /// `{"results":[{"name":"…","value":…,"unit":"…"}, …]}`.
    static func json(_ results: [BenchResult]) -> String {
        let items = results.map { result in
            let value = result.value.isFinite ? "\(result.value)" : "null"
            return
                #"{"name":\#(JSONValue.quoted(result.name)),"value":\#(value),"unit":\#(JSONValue.quoted(result.unit))}"#
        }
        return #"{"results":[\#(items.joined(separator: ","))]}"#
    }

    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "n/a" }
        let decimals = abs(value) >= 100 ? 0 : abs(value) >= 10 ? 1 : 3
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = decimals == 0 ? "\(Int(rounded))" : "\(rounded)"
        if decimals > 0, let dot = text.firstIndex(of: ".") {
            let fraction = text.distance(from: dot, to: text.endIndex) - 1
            text += String(repeating: "0", count: max(0, decimals - fraction))
        }
        return text
    }
}

extension String {
    fileprivate func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
