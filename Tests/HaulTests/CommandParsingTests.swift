import ArgumentParser
import Testing
@testable import HaulCLI

/// `get`, `put` and `mirror` are parsed by their own command when the line parses (a shorter
/// start), to the same values as through `haul`; anything else goes through `haul` as before.
@Suite struct CommandParsingTests {
    @Test(arguments: [
        ["get", "http://h.example/a.bin"],
        ["get", "-j", "4", "-q", "-d", "out", "--limit-rate", "1M", "-x", "2", "http://h.example/a", "http://h.example/b"],
        ["get", "--header", "X-A: b", "--no-proxy", "*", "--user-agent", "u/1", "http://h.example/a"],
        ["put", "-q", "--protocol", "put", "--state-dir", "s", "f.bin", "http://h.example/up"],
        ["put", "--limit-rate", "64M", "f.bin", "http://h.example/files/"],
        ["mirror", "-q", "-j", "8", "--delete", "http://h.example/tree/", "out"],
    ])
    func aLineParsedAloneHasTheValuesOfTheSameLineThroughHaul(_ line: [String]) throws {
        let alone = try #require(HaulCommand.parsedOnItsOwn(line))
        let throughHaul = try HaulCommand.parseAsRoot(line)
        #expect(type(of: alone) == type(of: throughHaul))
        // The description lists every option's parsed value.
        #expect(String(describing: alone).contains("h.example"))
        #expect(String(describing: alone) == String(describing: throughHaul))
    }

    @Test(arguments: [
        [], ["--version"], ["--help"], ["ls"], ["daemon"], ["status", "0123456789abcdef"],
        ["put"], ["put", "--help"], ["get", "--bogus", "http://h.example/a"], ["mirror", "http://h.example/"],
        ["get", "-h"], ["put", "--generate-completion-script", "bash"], ["help", "get"],
    ])
    func anythingElseIsLeftToHaul(_ line: [String]) {
        #expect(HaulCommand.parsedOnItsOwn(line) == nil)
    }
}
