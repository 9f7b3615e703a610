import Foundation
import SessionKitCLICore

exit(await SessionKitTool.run(Array(CommandLine.arguments.dropFirst())))
