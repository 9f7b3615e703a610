import Foundation
import SessionKitCLICore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// A closed pipe (`sessionkit --help | head -1`) must fail a write with EPIPE, which the tool reports, rather than
// kill the process.
signal(SIGPIPE, SIG_IGN)
exit(await SessionKitTool.run(Array(CommandLine.arguments.dropFirst())))
