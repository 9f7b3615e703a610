import Dispatch
import Foundation

#if canImport(CSessionKitCrypto)
    import CSessionKitCrypto
#endif

/// One thread per process for work that is never urgent and only saves a request time later: preparing signature
/// nonces (`PlatformCrypto.P256KeyObject`). A whole next proof made ahead was tried and removed (BENCHMARKS.md).
///
/// On Linux the thread runs in the SCHED_IDLE class: only on a core no other thread wants, preempted the moment one
/// does, so this work never takes a core from a request, or from a server in the same process; on a machine with no
/// idle core it falls behind, and the requests do the work themselves, as they would without it. Elsewhere it runs
/// at background quality of service.
///
/// A job runs again as long as it returns `true`, each run short (one nonce, one proof), so the exit below waits for
/// one short run at most. OpenSSL frees its tables in an `atexit` handler, and a signature made while that runs reads
/// freed memory: handlers run in reverse order of registration and OpenSSL's is registered at its first use, before
/// any job can exist, so the handler registered here runs first, waits for the run under way, and stops the thread.
package final class IdleWorker: Sendable {
    package static let shared = IdleWorker()

    private let jobs = Lock<[@Sendable () -> Bool]>([])
    private let wake = DispatchSemaphore(value: 0)
    /// Whether the process is exiting; held for each run of a job.
    private let exiting = Lock(false)

    private init() {
        let thread = Thread { [self] in
            // Named here: on Linux a name set before `start()` is not given to the thread.
            Thread.current.name = "SessionKit idle"
            #if canImport(CSessionKitCrypto)
                _ = sk_thread_run_when_idle()
            #endif
            while true {
                wake.wait()
                for job in jobs.withLock({ jobs in
                    defer { jobs = [] }
                    return jobs
                }) {
                    while exiting.withLock({ exiting in !exiting && job() }) {}
                }
            }
        }
        thread.qualityOfService = .background
        thread.start()
        atexit { IdleWorker.shared.stopForExit() }
    }

    /// Queues `job`, which runs again while it returns `true`; returns at once.
    package func submit(_ job: @escaping @Sendable () -> Bool) {
        jobs.withLock { $0.append(job) }
        wake.signal()
    }

    private func stopForExit() {
        exiting.withLock { $0 = true }
    }
}
