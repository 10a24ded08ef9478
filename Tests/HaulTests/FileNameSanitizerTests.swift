import Foundation
import Testing
@testable import Haul

@Suite("File name sanitizer")
struct FileNameSanitizerTests {
    @Test(
        "makes a safe component",
        arguments: [
            ("report.pdf", "report.pdf"),
            ("file name.iso", "file name.iso"),
            ("../../etc/passwd", "passwd"),
            (#"..\..\windows\system32\cmd.exe"#, "cmd.exe"),
            ("C:\\Users\\me\\x.txt", "x.txt"),
            ("/absolute/path.bin", "path.bin"),
            ("..evil", "evil"),
            (".bashrc", "bashrc"),
            ("...", nil),
            (". . .hidden", "hidden"),
            ("  padded.txt  ", "padded.txt"),
            ("trailing.dots...", "trailing.dots"),
            ("trailing. . ", "trailing"),
            ("a\0b.txt", "ab.txt"),
            ("line\nbreak\r.txt", "linebreak.txt"),
            ("bell\u{07}\u{1B}[31mred.txt", "bell[31mred.txt"),
            ("del\u{7F}.txt", "del.txt"),
            ("c1\u{85}\u{9B}.txt", "c1.txt"),
            ("evil\u{202E}txt.exe", "eviltxt.exe"),
            ("€ rates.txt", "€ rates.txt"),
            ("日本語.txt", "日本語.txt"),
            ("\u{00A0}nbsp\u{00A0}", "nbsp"),
            ("\0.\0.\0", nil),
            ("dir/", nil),
            ("", nil),
            (".", nil),
            ("..", nil),
            ("   ", nil),
            ("/", nil),
            ("\n\t", nil),
        ] as [(String, String?)])
    func sanitize(name: String, expected: String?) {
        #expect(FileNameSanitizer.sanitize(name) == expected)
    }

    // 246 bytes: 255 (NAME_MAX) less ".part" and the ".999" of a name stepped around, so the
    // part file and every step-around name of a kept name fit.
    @Test(
        "caps long names at 246 bytes",
        arguments: [
            (String(repeating: "a", count: 300) + ".iso", String(repeating: "a", count: 242) + ".iso"),
            (String(repeating: "a", count: 300), String(repeating: "a", count: 246)),
            // Three-byte characters: 82 of them fill 246 bytes.
            (String(repeating: "€", count: 100), String(repeating: "€", count: 82)),
            (String(repeating: "€", count: 100) + ".txt", String(repeating: "€", count: 80) + ".txt"),
            // An "extension" longer than 32 bytes is just part of the name.
            ("a." + String(repeating: "b", count: 300), "a." + String(repeating: "b", count: 244)),
            // A cut that ends in dots or spaces is trimmed.
            (String(repeating: "a", count: 241) + "     bbbbbbbbbb", String(repeating: "a", count: 241)),
            // Exactly 246 bytes stays as is.
            (String(repeating: "z", count: 242) + ".txt", String(repeating: "z", count: 242) + ".txt"),
        ])
    func longNames(name: String, expected: String) throws {
        let result = try #require(FileNameSanitizer.sanitize(name))
        #expect(result == expected)
        #expect(result.utf8.count <= FileNameSanitizer.maxBytes)
    }

    @Test func doesNotSplitCombiningMarks() throws {
        // "é" written as e + U+0301 is one character of three bytes.
        let name = String(repeating: "e\u{301}", count: 100)
        let result = try #require(FileNameSanitizer.sanitize(name))
        #expect(result == String(repeating: "e\u{301}", count: 82))
    }

    @Test(
        "names a file after a URL path",
        arguments: [
            ("/a/b/file%20name.iso", "file name.iso"),
            ("/file.tar.gz", "file.tar.gz"),
            ("/", nil),
            ("", nil),
            ("/dir/", "dir"),
            ("//double//slash//x.bin", "x.bin"),
            ("/..%2F..%2Fetc%2Fpasswd", "passwd"),
            ("/%2e%2e", nil),
            ("/a/..", nil),
            ("/a/%5C..%5Cwin.ini", "win.ini"),
            ("/100%", "100%"),
            ("/bad%zzescape.txt", "bad%zzescape.txt"),
            ("/latin1%E9.txt", "latin1%E9.txt"),
            ("/%E2%82%AC.txt", "€.txt"),
            ("/nul%00byte.txt", "nulbyte.txt"),
            ("/new%0Aline.txt", "newline.txt"),
            ("/.hidden", "hidden"),
            ("/pkg/file-1_2.3+4~.bin", "file-1_2.3+4~.bin"),
            ("/...", nil),
            ("/x.", "x"),
            ("/" + String(repeating: "a", count: 300) + ".txt", String(repeating: "a", count: 242) + ".txt"),
        ] as [(String, String?)])
    func urlPath(path: String, expected: String?) {
        #expect(FileNameSanitizer.name(fromURLPath: path) == expected)
    }

    /// The shortcut for plain names gives what the full rules give.
    @Test func plainNamesNeedNoRules() {
        for name in ["a", "file.bin", "x-1_2+3~", "A.B.C", "f9999.bin", String(repeating: "z", count: 246)] {
            #expect(FileNameSanitizer.isPlain(name[...]))
            #expect(FileNameSanitizer.sanitize(name) == name)
        }
        for name in [".a", "a.", "a b", "a%20", "a\\b", "é", String(repeating: "z", count: 247), ""] {
            #expect(!FileNameSanitizer.isPlain(name[...]))
        }
    }

    /// The URL's path, read without parsing the whole URL, is the one URLComponents finds.
    @Test func urlPathAsURLComponentsReadsIt() throws {
        for url in [
            "http://h/a/b.bin", "https://u:p@h:8080/x%20y.iso?q=/z#f/g", "http://h", "http://h?x=/a", "http://h#/a",
            "http://[::1]:80/v6.bin", "http://h/dir/", "http://h/a;b=c/d.txt",
        ] {
            let expected = try #require(URLComponents(string: url)).percentEncodedPath
            #expect(DestinationResolver.percentEncodedPath(of: url) == expected, "\(url)")
        }
        #expect(DestinationResolver.name(of: "http://h/a/file%20name.iso?x=1") == "file name.iso")
    }
}
