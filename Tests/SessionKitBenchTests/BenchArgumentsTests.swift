import Testing

@testable import SessionKitBench

@Suite(.timeLimit(.minutes(5))) struct BenchArgumentsTests {
    @Test func noArgumentsRunEverythingAsATable() throws {
        #expect(try BenchArguments.parse([]) == BenchArguments())
    }

    @Test func jsonAndOnlyAreReadInAnyOrder() throws {
        var expected = BenchArguments()
        expected.json = true
        expected.prefix = "request."
        #expect(try BenchArguments.parse(["--json", "--only", "request."]) == expected)
        #expect(try BenchArguments.parse(["--only", "request.", "--json"]) == expected)
        #expect(try BenchArguments.parse(["--only=request.", "--json"]) == expected)
    }

    @Test func onlyWithoutAValueIsRefused() {
        #expect(throws: BenchArguments.ParseError.missingValue("--only")) { try BenchArguments.parse(["--only"]) }
        #expect(throws: BenchArguments.ParseError.missingValue("--only")) {
            try BenchArguments.parse(["--only", "--json"])
        }
        #expect(throws: BenchArguments.ParseError.missingValue("--only")) { try BenchArguments.parse(["--only="]) }
        #expect(throws: BenchArguments.ParseError.missingValue("--only")) { try BenchArguments.parse(["--only", ""]) }
    }

    @Test func unknownArgumentsAreRefusedByName() {
        #expect(throws: BenchArguments.ParseError.unknown("--jsn")) { try BenchArguments.parse(["--jsn"]) }
        #expect(throws: BenchArguments.ParseError.unknown("request")) { try BenchArguments.parse(["request"]) }
        #expect(BenchArguments.ParseError.unknown("--jsn").description == "unknown argument --jsn")
    }

    @Test func profileTakesAKnownVariantAndAPositiveCount() throws {
        let parsed = try BenchArguments.parse(["--profile", "cache-hit", "--requests", "500"])
        #expect(parsed.profile == .cacheHit)
        #expect(parsed.requests == 500)
        #expect(throws: BenchArguments.ParseError.invalidValue("--profile", "fast")) {
            try BenchArguments.parse(["--profile", "fast"])
        }
        #expect(throws: BenchArguments.ParseError.invalidValue("--requests", "0")) {
            try BenchArguments.parse(["--requests", "0"])
        }
        #expect(throws: BenchArguments.ParseError.missingValue("--requests")) {
            try BenchArguments.parse(["--requests"])
        }
    }

    @Test func helpIsRecognized() throws {
        #expect(try BenchArguments.parse(["-h"]).help)
        #expect(try BenchArguments.parse(["--help"]).help)
    }

    @Test func onlySelectsBenchmarksAndResultsByNamePrefix() {
        let request = Benchmark(resultNames: ["request.ratio.sequential", "request.sequential.raw"], run: { [] })
        let cache = Benchmark(resultNames: ["cache.hit.speedup"], run: { [] })
        #expect(Benchmarks.selected(from: [request, cache], by: nil).count == 2)
        #expect(
            Benchmarks.selected(from: [request, cache], by: "request.ratio").map(\.resultNames) == [request.resultNames]
        )
        #expect(Benchmarks.selected(from: [request, cache], by: "fleet").isEmpty)

        var arguments = BenchArguments()
        arguments.prefix = "request.ratio"
        let results = [
            BenchResult(name: "request.ratio.sequential", value: 1, unit: "x"),
            BenchResult(name: "request.sequential.raw", value: 2, unit: "µs"),
        ]
        #expect(arguments.filter(results).map(\.name) == ["request.ratio.sequential"])
        #expect(BenchArguments().filter(results) == results)
    }

    @Test func everyBenchmarkNamesItsResultsUniquely() {
        let names = Benchmarks.all.flatMap(\.resultNames)
        #expect(Set(names).count == names.count)
        for required in [
            "request.ratio.sequential", "request.ratio.concurrent8", "coalesce.refreshes.k2", "coalesce.refreshes.k8",
            "coalesce.refreshes.k64", "coalesce.refreshes.k1000", "coalesce.seconds.k1000",
            "logout.detach.microseconds.n0", "logout.detach.microseconds.n100", "logout.detach.microseconds.n1000",
            "logout.drain.ratio.n1000", "cache.hit.speedup", "cache.entry.bytes", "session.create.microseconds",
            "session.memory.kilobytes", "fleet.token_requests.n10000", "fleet.outage.peak_to_mean",
            "fleet.outage.peak_to_mean.nojitter", "localserver.ratio.sequential", "localserver.ratio.concurrent8",
            "vault.refresh.milliseconds", "vault.notice.p99_ms", "vault.records.reads_per_second",
            "vault.records.writes_per_second",
        ] {
            #expect(names.contains(required), "\(required) is not produced by any benchmark")
        }
    }

    @Test func jsonEscapesNamesAndWritesNonFiniteValuesAsNull() {
        let json = BenchReport.json([
            BenchResult(name: "a\"b", value: 1.5, unit: "µs"),
            BenchResult(name: "c", value: .nan, unit: "x"),
        ])
        #expect(json == #"{"results":[{"name":"a\"b","value":1.5,"unit":"µs"},{"name":"c","value":null,"unit":"x"}]}"#)
    }
}

@Suite(.timeLimit(.minutes(5))) struct BenchProfileArgumentsTests {
    @Test func profileTakesAnHTTPServerURL() throws {
        let parsed = try BenchArguments.parse(["--profile", "raw", "--url", "http://127.0.0.1:8080"])
        #expect(parsed.url?.absoluteString == "http://127.0.0.1:8080")
        #expect(throws: BenchArguments.ParseError.invalidValue("--url", "ftp://x")) {
            try BenchArguments.parse(["--url", "ftp://x"])
        }
        #expect(throws: BenchArguments.ParseError.invalidValue("--url", "not a url")) {
            try BenchArguments.parse(["--url", "not a url"])
        }
        #expect(throws: BenchArguments.ParseError.missingValue("--url")) { try BenchArguments.parse(["--url"]) }
    }

    @Test func serveIsRecognized() throws {
        #expect(try BenchArguments.parse(["--serve"]).serve)
        #expect(try !BenchArguments.parse([]).serve)
    }

    /// The instruction count is read from callgrind's summary line, and a log without one yields nothing (the
    /// figure is then not reported), never a number.
    @Test func callgrindsTotalIsReadFromItsSummaryLine() {
        let log = "==123== Events    : Ir\n==123== Collected : 822183958\n==123==\n==123== I   refs:      822,183,958\n"
        #expect(InstructionBenchmarks.collected(in: log) == 822_183_958)
        #expect(InstructionBenchmarks.collected(in: "valgrind: command not found\n") == nil)
        #expect(InstructionBenchmarks.collected(in: "==1== Collected : lots\n") == nil)
    }
}
