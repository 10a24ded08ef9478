import Foundation
import Testing
@testable import HaulDaemon

/// Whether a folder a client names is inside the daemon's download folder, on a real tree
/// with real links (the daemon without a secret writes only there).
@Suite struct FolderPolicyTests {
    @Test func aFolderWrittenInsideWithoutLinksIsInsideAndALinkOutIsNot() throws {
        let temp = try TestDirectory()
        defer { temp.remove() }
        let root = temp.path + "/root"
        let outside = temp.path + "/outside"
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/out", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/in", withDestinationPath: root + "/a")
        try FileManager.default.createSymbolicLink(atPath: temp.path + "/alias", withDestinationPath: root)

        for inside in [root, root + "/a", root + "/a/b", root + "/a/b/new/deeper", root + "/in/b", root + "/a/../a"] {
            #expect(FolderPolicy.contains(root, inside), "\(inside)")
        }
        // Through a link to the folder itself: inside once links are followed.
        #expect(FolderPolicy.contains(root, temp.path + "/alias/a"))
        for outsider in [outside, root + "/out", root + "/out/new", temp.path, root + "x", "/"] {
            #expect(!FolderPolicy.contains(root, outsider), "\(outsider)")
        }
        #expect(FolderPolicy.plainlyInside(root, root + "/a/b/new"))
        #expect(!FolderPolicy.plainlyInside(root, root + "/in/b"), "a link below the folder needs realpath")
        #expect(FolderPolicy.contains("/", temp.path))
    }

    /// `é` written precomposed and as `e` with a combining accent are equal Swift strings but
    /// two names on disk: a folder named the other way is not the download folder.
    @Test func namesAreComparedByteForByte() throws {
        let temp = try TestDirectory()
        defer { temp.remove() }
        let root = temp.path + "/caf\u{E9}"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let lookalike = temp.path + "/cafe\u{301}"
        #expect(root == lookalike, "Swift compares canonically")
        #expect(!FolderPolicy.contains(root, lookalike + "/x"))
        #expect(!FolderPolicy.contains(root, lookalike))
        #expect(FolderPolicy.contains(root, root + "/x"))
    }
}
