import Foundation
import Testing
@testable import Haul

/// The one-pass reading of a URL gives what `URLComponents` gives, or leaves the URL to it.
struct HTTPURLTests {
    @Test(arguments: [
        "http://127.0.0.1:8080/f000001.bin",
        "http://example.com",
        "http://example.com/",
        "HTTP://Example.COM:80/A/b.tar.gz",
        "https://example.com:443/path/to/file.iso?x=1&y=2",
        "http://example.com?only=query",
        "http://example.com/p#fragment",
        "http://example.com/p?q#f?g",
        "http://example.com/p?q?r=s",
        "http://example.com:/empty-port",
        "http://a-b.c_d~e.example/!$&'()*+,;=:@/x",
        "http://example.com/with%20space",
        "http://user:pass@example.com/f",
        "http://[::1]:8080/f",
        "http://example.com:99999/too-big",
        "http://example.com:12a/bad-port",
        "http://exa mple.com/",
        "http://example.com/a b",
        "http://example.com/a#b#c",
        "http://éxample.com/f",
        "http://example.com/é",
        "http://EXAMPLE.com/MiXed",
        "http://",
        "http:///path",
        "mailto:someone@example.com",
        "ftp://example.com/f",
        "not a url",
    ])
    func agreesWithURLComponents(url: String) {
        let expected = URLComponents(string: url).flatMap { components -> HTTPURL? in
            let parsed = HTTPURL(components)
            return parsed.scheme.isEmpty || parsed.host.isEmpty ? nil : parsed
        }
        #expect(HTTPURL(url) == expected)
    }

    @Test func aRequestTargetHasAPath() throws {
        #expect(try #require(HTTPURL("http://h")).target == "/")
        #expect(try #require(HTTPURL("http://h?a=1")).target == "/?a=1")
        #expect(try #require(HTTPURL("http://h/p?a=1#f")).target == "/p?a=1")
        #expect(try #require(HTTPURL("http://h:8080/p")).effectivePort == 8080)
        #expect(try #require(HTTPURL("https://h/p")).effectivePort == 443)
        #expect(try #require(HTTPURL("http://h/p")).effectivePort == 80)
        #expect(try #require(HTTPURL("http://[::1]:8080/p")).bareHost == "::1")
    }

    /// What a resolver and a `Host` header take, where `URLComponents` gives Unicode.
    @Test func anIDNAHostStaysAsWritten() throws {
        #expect(try #require(HTTPURL("http://xn--bcher-kva.example/f")).host == "xn--bcher-kva.example")
    }
}
