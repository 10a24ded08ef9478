import Foundation
import Testing
@testable import Haul

/// The listing readers on pages written by hand: each server's shape, and hostile pages.
@Suite("Directory listings")
struct DirectoryListingTests {
    static let page = "http://h.test/pub/"

    static func read(_ html: String, contentType: String? = "text/html", url: String = page) -> DirectoryListing {
        DirectoryListing.read(Array(html.utf8), contentType: contentType, url: url)
    }

    static func names(_ listing: DirectoryListing) -> [String] {
        listing.entries.map { $0.isDirectory ? $0.name + "/" : $0.name }
    }

    @Test(
        "keeps only direct children of the page",
        arguments: [
            (#"<a href="a.txt">a</a>"#, ["a.txt"]),
            (#"<a href="sub/">sub</a>"#, ["sub/"]),
            (#"<a href="./c:d.txt">c</a>"#, ["c:d.txt"]),
            (#"<a href="/pub/abs.txt">x</a>"#, ["abs.txt"]),
            (#"<a href="http://h.test/pub/full.txt">x</a>"#, ["full.txt"]),
            (#"<a href="HTTP://H.TEST:80/pub/port.txt">x</a>"#, ["port.txt"]),
            (#"<a href="../">up</a>"#, []),
            (#"<a href="/">root</a>"#, []),
            (#"<a href="/pub/">self</a>"#, []),
            (#"<a href="/other/x.txt">x</a>"#, []),
            (#"<a href="http://evil.test/pub/x.txt">x</a>"#, []),
            (#"<a href="https://h.test/pub/x.txt">x</a>"#, []),
            (#"<a href="//evil.test/pub/x.txt">x</a>"#, []),
            (#"<a href="ftp://h.test/pub/x.txt">x</a>"#, []),
            (#"<a href="mailto:me@h.test">x</a>"#, []),
            (#"<a href="javascript:alert(1)">x</a>"#, []),
            (#"<a href="x-y.z+1:thing">x</a>"#, []),
            (#"<a href="1x:thing">x</a>"#, ["1x:thing"]),
            (#"<a href="é:x">x</a>"#, ["é:x"]),
            (#"<a href="?C=N;O=D">Name</a>"#, []),
            (#"<a href="x.txt?download=1">x</a>"#, []),
            (##"<a href="#top">top</a>"##, []),
            (#"<a href="a/b.txt">deeper</a>"#, []),
            (#"<a href="a/../../etc/passwd">x</a>"#, []),
            (#"<a href="..%2F..%2Fetc%2Fpasswd">x</a>"#, []),
            (#"<a href="%2e%2e/">x</a>"#, []),
            (#"<a href=".">x</a>"#, []),
            (#"<a href="">x</a>"#, []),
        ] as [(String, [String])])
    func scope(html: String, expected: [String]) {
        #expect(Self.names(Self.read(html)) == expected, "\(html)")
    }

    @Test func decodesEntitiesAndPercentEncodingOnce() {
        let listing = Self.read(
            #"<A HREF='a&amp;b%20%C3%A9.txt'>x</A><a class=x href=plain.bin>y</a><a href="caf&#xE9;.txt">z</a><a href="100%25.txt">p</a>"#)
        #expect(Self.names(listing) == ["a&b é.txt", "plain.bin", "café.txt", "100%.txt"])
        #expect(listing.entries[0].url == "http://h.test/pub/a%26b%20%C3%A9.txt")
        #expect(listing.entries[2].url == "http://h.test/pub/caf%C3%A9.txt")
        #expect(listing.entries[3].url == "http://h.test/pub/100%25.txt")
    }

    @Test func aNameThatIsNotUTF8KeepsItsBytesInTheURLAndEscapesThemInTheName() {
        let listing = Self.read(#"<a href="lat%E9.txt">x</a><a href="lat%E8.txt">y</a>"#)
        #expect(Self.names(listing) == ["lat%E9.txt", "lat%E8.txt"])
        #expect(listing.entries.map(\.url) == ["http://h.test/pub/lat%E9.txt", "http://h.test/pub/lat%E8.txt"])
    }

    @Test func namesAreSanitisedAsGetDoes() {
        let listing = Self.read(#"<a href=".hidden">h</a><a href="evil%E2%80%AEtxt.exe">e</a><a href="bell%1B.txt">b</a>"#)
        #expect(Self.names(listing) == ["hidden", "eviltxt.exe", "bell.txt"])
    }

    @Test func repeatsAndSpellingsOfOneLinkAreOneEntry() {
        let listing = Self.read(#"<a href="a%20b">1</a><a href="a b">2</a><a href="./a%20b">3</a><a href="/pub/a%20b">4</a>"#)
        #expect(Self.names(listing) == ["a b"])
        #expect(listing.leftOut == 3)
    }

    @Test func skipsCommentsScriptsAndStyles() {
        let html = """
            <!-- <a href="commented.txt"> --><script>var s = '<a href="script.txt">';</script>
            <style>a[href="style.txt"] {}</style><a href="real.txt">r</a>
            """
        #expect(Self.names(Self.read(html)) == ["real.txt"])
    }

    @Test func aPageCutShortReadsWhatItHas() {
        #expect(Self.names(Self.read(#"<a href="one.txt">1</a><a href="two"#)) == ["one.txt"])
        #expect(Self.names(Self.read("<a href=")) == [])
        #expect(Self.names(Self.read("<<<>>><a")) == [])
    }

    @Test func nginxJSON() {
        let json =
            #"[{"name":"sub dir","type":"directory","mtime":"x"},{"name":"a&b.txt","type":"file","size":3},{"name":"../up","type":"file"},{"name":"x/y","type":"file"},{"name":"..","type":"directory"},7]"#
        let listing = Self.read(json, contentType: "application/json")
        #expect(Self.names(listing) == ["sub dir/", "a&b.txt"])
        #expect(listing.entries.map(\.url) == ["http://h.test/pub/sub%20dir/", "http://h.test/pub/a%26b.txt"])
        #expect(listing.leftOut == 4)
    }

    @Test func nginxWritesNamesThatAreNotUTF8RawIntoJSONAndXML() {
        let json = Array(#"[{"name":"lat"#.utf8) + [0xE9] + Array(#".txt","type":"file"}]"#.utf8)
        let xml = Array("<?xml version=\"1.0\"?><list><file>lat".utf8) + [0xE9] + Array(".txt</file></list>".utf8)
        for (body, type) in [(json, "application/json"), (xml, "text/xml")] {
            let listing = DirectoryListing.read(body, contentType: type, url: Self.page)
            #expect(listing.entries.map(\.name) == ["lat%E9.txt"], "\(type)")
            #expect(listing.entries.map(\.url) == ["http://h.test/pub/lat%E9.txt"], "\(type)")
        }
    }

    @Test func aBrokenJSONOrXMLPageIsUnreadableNotEmpty() {
        #expect(Self.read(#"[{"name":"a.txt""#, contentType: "application/json").unreadable)
        #expect(Self.read("<list><file>a.txt</fi", contentType: "text/xml").unreadable)
        #expect(!Self.read("[]", contentType: "application/json").unreadable)
    }

    @Test func caddyJSONPrefersTheURLWhichKeepsEveryByte() {
        let json = #"[{"name":"b/","url":"./b/","is_dir":true},{"name":"lat\ufffd.txt","url":"./lat%E9.txt","is_dir":false},{"name":"up","url":"../up"}]"#
        let listing = Self.read(json, contentType: "application/json")
        #expect(Self.names(listing) == ["b/", "lat%E9.txt"])
    }

    @Test func nginxXML() {
        let xml = """
            <?xml version="1.0"?>
            <list><directory mtime="2026-01-01T00:00:00Z">sub</directory><file mtime="x" size="3">a&amp;b.txt</file><file>../x</file></list>
            """
        let listing = Self.read(xml, contentType: "text/xml")
        #expect(Self.names(listing) == ["sub/", "a&b.txt"])
    }

    @Test func xmlWithAnExternalEntityReadsNothingFromTheDisk() {
        let xml = """
            <?xml version="1.0"?><!DOCTYPE list [<!ENTITY x SYSTEM "file:///etc/hostname">]>
            <list><file>&x;</file><file>ok.txt</file></list>
            """
        let names = Self.names(Self.read(xml, contentType: "application/xml"))
        #expect(
            !names.contains {
                $0.contains((try? String(contentsOfFile: "/etc/hostname", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "\u{0}")
            })
    }

    @Test func formatByContentOrType() {
        #expect(DirectoryListing.format(of: Array("[]".utf8), contentType: nil) == .json)
        #expect(DirectoryListing.format(of: Array("<?xml version=\"1.0\"?><list/>".utf8), contentType: nil) == .xml)
        #expect(DirectoryListing.format(of: Array("<html>".utf8), contentType: nil) == .html)
        #expect(DirectoryListing.format(of: Array("[".utf8), contentType: "text/html; charset=utf-8") == .html)
    }

    @Test func aHundredThousandEntries() {
        var html = "<html><body><pre>\n"
        for index in 0..<100_000 { html += "<a href=\"f\(index).bin\">f\(index).bin</a>   01-Jan-2026 00:00   1\n" }
        let listing = Self.read(html + "</pre></body></html>")
        #expect(listing.entries.count == 100_000)
        #expect(listing.entries.last?.url == "http://h.test/pub/f99999.bin")
    }
}
