import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// `SharedLock`, which lets a session's requests create their URLSession tasks at the same time while the
/// invalidation of that URLSession waits for every creation under way. Every wait is on a thread of its own, never
/// on Swift's cooperative pool, and bounded, so that a lock that wrongly blocks fails the test instead of hanging it.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SharedLockTests {
    /// Two readers hold the lock at once: the second enters while the first still holds it.
    @Test func readersDoNotWaitForEachOther() async {
        let lock = SharedLock(true)
        let (firstInside, secondInside) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let (sawSecond, firstDone) = (Locked(false), DispatchSemaphore(value: 0))
        Thread {
            lock.withSharedLock { _ in
                firstInside.signal()
                // Released only by the second reader, from inside the lock; a second reader that waits for this
                // one gets in only after the timeout.
                sawSecond.withLock { $0 = secondInside.wait(timeout: .now() + .seconds(1)) == .success }
            }
            firstDone.signal()
        }.start()
        await onThreadOfItsOwn {
            firstInside.wait()
            lock.withSharedLock { _ in _ = secondInside.signal() }
            firstDone.wait()
        }
        #expect(sawSecond.withLock { $0 }, "the second reader waited for the first")
    }

    /// A writer waits until every reader under way has finished, then sees the state they saw and changes it for
    /// every reader after it.
    @Test func aWriterWaitsForTheReadersUnderWay() async {
        let lock = SharedLock(true)
        let (holding, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        Thread {
            lock.withSharedLock { _ in
                holding.signal()
                release.wait()
            }
        }.start()
        await onThreadOfItsOwn { holding.wait() }
        #expect(lock.withExclusiveLockIfAvailable { _ in } == nil, "a reader holds it")
        let written = DispatchSemaphore(value: 0)
        Thread {
            lock.withExclusiveLock { $0 = false }
            written.signal()
        }.start()
        let writtenMeanwhile = await onThreadOfItsOwn {
            written.wait(timeout: .now() + .milliseconds(300)) == .success
        }
        #expect(!writtenMeanwhile, "the writer did not wait for the reader")
        release.signal()
        if !writtenMeanwhile { await onThreadOfItsOwn { written.wait() } }
        #expect(lock.withSharedLock { $0 } == false)
        #expect(lock.withExclusiveLockIfAvailable { $0 } == false, "free again once the writer is done")
    }

    /// A reader waits while a writer holds the lock.
    @Test func aReaderWaitsForTheWriter() async {
        let lock = SharedLock(0)
        let (holding, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        Thread {
            lock.withExclusiveLock { value in
                holding.signal()
                release.wait()
                value = 1
            }
        }.start()
        await onThreadOfItsOwn { holding.wait() }
        let read = DispatchSemaphore(value: 0)
        let seen = Locked<Int?>(nil)
        Thread {
            let value = lock.withSharedLock { $0 }
            seen.withLock { $0 = value }
            read.signal()
        }.start()
        let readMeanwhile = await onThreadOfItsOwn { read.wait(timeout: .now() + .milliseconds(300)) == .success }
        #expect(!readMeanwhile, "the reader did not wait for the writer")
        release.signal()
        if !readMeanwhile { await onThreadOfItsOwn { read.wait() } }
        #expect(seen.withLock { $0 } == 1, "the reader saw the writer's change")
    }

    private func onThreadOfItsOwn<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { (done: CheckedContinuation<Result, Never>) in
            Thread { done.resume(returning: body()) }.start()
        }
    }
}
