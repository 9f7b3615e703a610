import Foundation

FileHandle.standardError.write(Data("sessionkit: the demo is not built yet\n".utf8))
exit(2)
