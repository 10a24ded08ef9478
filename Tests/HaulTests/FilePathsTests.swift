import Testing
@testable import Haul

struct FilePathsTests {
    @Test(
        "normalizes without the disk",
        arguments: [
            ("/a/b", "/a/b"),
            ("/a//b", "/a/b"),
            ("/a/./b", "/a/b"),
            ("/a/../b", "/b"),
            ("/a/b/", "/a/b"),
            ("/a/b/.", "/a/b"),
            ("/a/b/..", "/a"),
            ("/a/...", "/a/..."),
            ("/.a/b.", "/.a/b."),
            ("/", "/"),
            ("//", "/"),
            ("/..", "/"),
            ("a/../../b", "../b"),
            ("", "."),
        ])
    func normalized(path: String, expected: String) {
        #expect(FilePaths.normalized(path) == expected)
    }

    @Test func onlyCleanAbsolutePathsTakeTheShortcut() {
        for path in ["/a", "/a/b.c", "/a/...", "/.x/y"] { #expect(FilePaths.isNormalizedAbsolute(path)) }
        for path in ["/", "a/b", "/a/", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", ""] {
            #expect(!FilePaths.isNormalizedAbsolute(path))
        }
    }
}

extension FilePathsTests {
    @Test func aCommittedFilesFolder() {
        #expect(FilePaths.folder(of: "/a/b/c.bin") == "/a/b")
        #expect(FilePaths.folder(of: "/c.bin") == "/")
    }
}
