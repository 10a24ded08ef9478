import Testing
@testable import HaulCLI

/// aria2's input-file format as `haul get -i` reads it: the quick look at a line that is one URL
/// and nothing else agrees with the general rules, and every other line still goes through them.
@Suite struct InputFileTests {
    @Test func aLineThatIsOneURLIsTakenAsIs() throws {
        #expect(InputFile.plainURL("http://h.example/a.bin") == "http://h.example/a.bin")
        #expect(InputFile.plainURL("http://h.example/a.bin\r") == "http://h.example/a.bin")
        #expect(InputFile.plainURL("http://h.example/a b.bin") == "http://h.example/a b.bin")
        #expect(InputFile.plainURL("http://h.example/a\u{A0}b.bin") == "http://h.example/a\u{A0}b.bin")
        // Anything the general rules would change, or read as something else, is left to them.
        for line in [
            "", "\r", " http://h.example/a", "http://h.example/a ", "\thttp://h.example/a", "http://h.example/a\t",
            "# http://h.example/a", "http://h.example/a\thttp://m.example/a", "http://h.example/é", "http://h.example/a\u{A0}",
            "  out=x.bin",
        ] {
            #expect(InputFile.plainURL(line[...]) == nil, "\(line.debugDescription)")
        }
    }

    @Test func listsReadTheSameWhicheverWayEachLineIsRead() throws {
        let text = """
            http://h.example/1\r
            # a comment
            http://h.example/2  \r
              out=two.bin
            http://h.example/3\thttp://m.example/3 \t
            \u{A0}http://h.example/4\u{A0}
            http://h.example/5
            """
        let entries = try InputFile.parse(text, name: "list")
        #expect(
            entries == [
                InputEntry(url: "http://h.example/1"),
                InputEntry(url: "http://h.example/2", out: "two.bin"),
                InputEntry(url: "http://h.example/3", mirrors: ["http://m.example/3"]),
                InputEntry(url: "http://h.example/4"),
                InputEntry(url: "http://h.example/5"),
            ])
    }
}
