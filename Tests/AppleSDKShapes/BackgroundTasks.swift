// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation
// The shape of Apple's BackgroundTasks, for `scripts/apple-typecheck`: declarations only, nothing here runs.
//
// SDK followed: iOS 26 (Xcode 26), transcribed from BackgroundTasks' documentation on developer.apple.com
// (BGTaskScheduler.h, BGTaskRequest.h). The scheduler is unavailable on macOS and watchOS, as Apple declares; this
// check runs on Linux, where availability is not enforced, so a call needs its own `os(...)` guard on those platforms.

import Foundation

@available(iOS 13.0, tvOS 13.0, macCatalyst 13.1, visionOS 1.0, *)
@available(macOS, unavailable)
@available(watchOS, unavailable)
open class BGTaskRequest: NSObject {
    open var identifier: String { shape() }
    open var earliestBeginDate: Date?
}

@available(iOS 13.0, tvOS 13.0, macCatalyst 13.1, visionOS 1.0, *)
@available(macOS, unavailable)
@available(watchOS, unavailable)
open class BGAppRefreshTaskRequest: BGTaskRequest {
    public init(identifier: String) { shape() }
}

@available(iOS 13.0, tvOS 13.0, macCatalyst 13.1, visionOS 1.0, *)
@available(macOS, unavailable)
@available(watchOS, unavailable)
open class BGTask: NSObject {
    open var identifier: String { shape() }
    open var expirationHandler: (() -> Void)?
    open func setTaskCompleted(success: Bool) { shape() }
}

@available(iOS 13.0, tvOS 13.0, macCatalyst 13.1, visionOS 1.0, *)
@available(macOS, unavailable)
@available(watchOS, unavailable)
open class BGTaskScheduler: NSObject {
    open class var shared: BGTaskScheduler { shape() }

    open func register(
        forTaskWithIdentifier identifier: String, using queue: DispatchQueue?,
        launchHandler: @escaping (BGTask) -> Void
    ) -> Bool {
        shape()
    }
    open func submit(_ taskRequest: BGTaskRequest) throws { shape() }
    open func cancel(taskRequestWithIdentifier identifier: String) { shape() }
    open func cancelAllTaskRequests() { shape() }
    open func getPendingTaskRequests(completionHandler: @escaping @Sendable ([BGTaskRequest]) -> Void) { shape() }
    open func pendingTaskRequests() async -> [BGTaskRequest] { shape() }
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
