import Testing
@testable import Haul

@Suite("Mirror globs")
struct GlobTests {
    @Test(
        arguments: [
            ("a/b/x.iso", false, ["*.iso"], [], true),
            ("a/b/x.iso", false, ["a/*/x.iso"], [], true),
            ("a/b/x.iso", false, ["a/*.iso"], [], false),
            ("a/b/x.txt", false, ["*.iso"], [], false),
            ("a/b/", true, ["*.iso"], [], true),
            ("a/b/", true, [], ["b"], false),
            ("a/b/x.iso", false, [], ["*.iso"], false),
            ("a/b/x.iso", false, ["*.iso"], ["a/b/*"], false),
        ] as [(String, Bool, [String], [String], Bool)])
    func accepts(path: String, isDirectory: Bool, include: [String], exclude: [String], expected: Bool) {
        #expect(Glob.accepts(path, isDirectory: isDirectory, include: include, exclude: exclude) == expected)
    }
}
