import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// Cancellations that land while answers arrive: a session ended, and callers cancelled, at seeded points while
/// its requests complete. FoundationNetworking stops the process when a task is cancelled while its completion
/// runs (the task leaves the session's registry between the two steps of the cancellation); this drives that
/// window as often as it can. `SESSIONKIT_CANCEL_RACES` sets the number of rounds.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(30, by: "SESSIONKIT_CANCEL_RACES", reference: 1_000))))
struct CancellationRaceTests {
    @Test func endingAndCancellingWhileAnswersArriveNeverStopsTheProcess() async throws {
        let rounds = ProcessInfo.processInfo.environment["SESSIONKIT_CANCEL_RACES"].flatMap { Int($0) } ?? 150
        var generator = SeededGenerator(seed: UInt64.random(in: 0...(1 << 48)))
        try await LocalServer.withRunning { server async throws in
            server.route("/fast", emptyJSONHandler)
            server.route("/denied") { _ in
                LocalServer.Response(status: 401, headers: [("WWW-Authenticate", #"Bearer error="invalid_token""#)])
            }
            var answered = 0
            var ended = 0
            var cancelled = 0
            for _ in 0..<rounds {
                let session = UserSession(account: alice, tokens: tokens("alice"))
                let endAfter = Int.random(in: 0..<40, using: &generator)
                let cancelAfter = Int.random(in: 0..<40, using: &generator)
                let outcomes = await withTaskGroup(of: Outcome.self) { group -> [Outcome] in
                    for index in 0..<24 {
                        let path = index % 3 == 0 ? "/denied" : "/fast"
                        group.addTask {
                            do {
                                _ = try await session.data(for: get(server, path))
                                return .answered
                            } catch let error as SessionError where error.code == .sessionEnded {
                                return .ended
                            } catch is CancellationError {
                                return .cancelled
                            } catch let error as SessionError where error.code == .accessExpired {
                                return .answered
                            } catch {
                                return .other("\(error)")
                            }
                        }
                    }
                    var outcomes: [Outcome] = []
                    var step = 0
                    while let outcome = await group.next() {
                        outcomes.append(outcome)
                        step += 1
                        if step == endAfter % 24 { session.end() }
                        if step == cancelAfter % 24 { group.cancelAll() }
                    }
                    return outcomes
                }
                session.end()
                #expect(outcomes.count == 24)
                for outcome in outcomes {
                    switch outcome {
                    case .answered: answered += 1
                    case .ended: ended += 1
                    case .cancelled: cancelled += 1
                    case .other(let description): Issue.record("an untyped failure: \(description)")
                    }
                }
            }
            // Every kind of ending was reached, so the races were run, not skipped.
            #expect(answered > 0 && ended > 0 && cancelled > 0, "\(answered) \(ended) \(cancelled)")
        }
    }

    /// The same races while every answer is a redirect: each request follows a same-origin loop until the
    /// session refuses the 21st hop, so the session's delegate is asked about a redirect again and again while
    /// tasks are cancelled. FoundationNetworking stops the process when the answer to that question reaches a task
    /// whose cancellation has begun (the cancellation stops the transfer before the answer arrives).
    @Test func endingAndCancellingWhileRequestsAreRedirectedNeverStopsTheProcess() async throws {
        let rounds = ProcessInfo.processInfo.environment["SESSIONKIT_CANCEL_RACES"].flatMap { Int($0) } ?? 150
        var generator = SeededGenerator(seed: UInt64.random(in: 0...(1 << 48)))
        try await LocalServer.withRunning { server async throws in
            server.route("/loop") { request in
                let hop = (request.query?.split(separator: "=").last.flatMap { Int($0) } ?? 0) + 1
                return .text("", status: 302, headers: [("Location", "/loop?hop=\(hop)")])
            }
            var (refused, ended, cancelled) = (0, 0, 0)
            for _ in 0..<rounds {
                let session = UserSession(account: alice, tokens: tokens("alice"))
                let endAfter = Int.random(in: 0..<16, using: &generator)
                let cancelAfter = Int.random(in: 0..<16, using: &generator)
                let outcomes = await withTaskGroup(of: String.self) { group -> [String] in
                    for _ in 0..<8 {
                        group.addTask {
                            do {
                                _ = try await session.data(for: get(server, "/loop"))
                                return "answered"
                            } catch let error as SessionError {
                                return "\(error.code)"
                            } catch is CancellationError {
                                return "cancelled"
                            } catch {
                                return "\(error)"
                            }
                        }
                    }
                    var outcomes: [String] = []
                    // Ends and cancels while redirects are being answered, not only between requests.
                    for _ in 0..<(endAfter * 20) { await Task.yield() }
                    session.end()
                    for _ in 0..<(cancelAfter * 20) { await Task.yield() }
                    group.cancelAll()
                    while let outcome = await group.next() { outcomes.append(outcome) }
                    return outcomes
                }
                session.end()
                #expect(outcomes.count == 8)
                for outcome in outcomes {
                    switch outcome {
                    case "malformedResponse": refused += 1
                    case "sessionEnded": ended += 1
                    case "cancelled": cancelled += 1
                    default: Issue.record("an unexpected outcome: \(outcome)")
                    }
                }
            }
            print("redirect races: refused \(refused), ended \(ended), cancelled \(cancelled)")
            #expect(ended > 0, "no session ended while its requests were being redirected")
        }
    }

    private enum Outcome: Sendable {
        case answered, ended, cancelled
        case other(String)
    }
}
