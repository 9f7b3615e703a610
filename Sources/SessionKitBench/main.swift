import Foundation

FileHandle.standardError.write(Data("sessionkit-bench: no benchmark yet\n".utf8))
exit(2)
