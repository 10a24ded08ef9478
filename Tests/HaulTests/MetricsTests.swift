import AsyncHTTPClient
import Foundation
import HaulDaemon
import HaulTestSupport
import NIOCore
import Testing

/// `GET /metrics` of `haul daemon`: Prometheus' text format, what it counts, and who may read it.
@Suite(.serialized) struct MetricsTests {
    static let size = 256 << 10

    /// Debian's `promtool` (package `prometheus`), when installed.
    static let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// GETs `/metrics` with `headers`: the status, the body and the content type.
    func scrape(_ daemon: DaemonProcess, headers: [(String, String)] = []) async throws -> (status: Int, text: String, contentType: String?) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(daemon.endpoint.port)/metrics")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: body), response.headers.first(name: "content-type"))
    }

    /// Adds `url` through the RPC and returns its GID.
    func add(_ daemon: DaemonProcess, _ url: String) async throws -> String {
        try #require(try await daemon.call("aria2.addUri", [[.string(url)]]).string)
    }

    @Test func countsDownloadsRetriesBytesAndCommits() async throws {
        try await withDaemon { t in
            t.server.serve("/ok.bin", Route(content: testBytes(Self.size, seed: 1)))
            var flaky = Route(content: testBytes(Self.size, seed: 2))
            flaky.failFirst = 2
            flaky.failureStatus = 503
            flaky.retryAfter = "0"
            t.server.serve("/flaky.bin", flaky)
            var missing = Route(content: [])
            missing.status = 404
            t.server.serve("/missing.bin", missing)

            var gids: [String] = []
            for path in ["/ok.bin", "/flaky.bin", "/missing.bin"] { gids.append(try await add(t.daemon, t.server.url(path))) }
            for gid in gids {
                _ = try await t.daemon.waitFor(gid) { ["complete", "error"].contains($0["status"]?.string ?? "") }
            }

            let (status, text, contentType) = try await scrape(t.daemon)
            #expect(status == 200)
            #expect(contentType?.hasPrefix("text/plain; version=0.0.4") == true, "\(contentType ?? "none")")
            let exposition = Exposition(text)
            #expect(exposition.problems.isEmpty, "\(exposition.problems)\n\(text)")
            #expect(exposition.types["haul_downloads"] == "gauge")
            #expect(exposition.types["haul_downloaded_bytes_total"] == "counter")
            #expect(exposition.types["haul_store_commit_duration_seconds"] == "histogram")

            let value = { (key: String) in exposition.samples[key] }
            #expect(value(#"haul_downloads{state="complete"}"#) == 2)
            #expect(value(#"haul_downloads{state="error"}"#) == 1)
            for state in ["active", "waiting", "paused"] { #expect(value(#"haul_downloads{state="\#(state)"}"#) == 0, "\(state)") }
            #expect(value("haul_downloads_completed_total") == 2)
            #expect(value("haul_downloads_failed_total") == 1)
            #expect(value(#"haul_retries_total{reason="http-503"}"#) == 2)
            #expect(exposition.samples.keys.filter { $0.hasPrefix("haul_retries_total") }.count == 1, "the 404 is not retried")
            #expect(value("haul_downloaded_bytes_total") == Double(2 * Self.size))
            #expect(value("haul_download_speed_bytes_per_second") == 0)
            // A file reaches its name only once its row's insert is written: at least one
            // transaction was timed (more when the changes missed each other's group commit).
            let commits = try #require(value("haul_store_commit_duration_seconds_count"))
            #expect(commits >= 1)
            #expect(value(#"haul_store_commit_duration_seconds_bucket{le="+Inf"}"#) == commits)
            #expect((value("haul_store_commit_duration_seconds_sum") ?? -1) > 0)
        }
    }

    @Test func showsTheRunningDownloadsSpeedAndState() async throws {
        try await withDaemon { t in
            var slow = Route(content: testBytes(4 << 20, seed: 3))
            slow.bytesPerSecond = 512 << 10
            t.server.serve("/slow.bin", slow)
            let gid = try await add(t.daemon, t.server.url("/slow.bin"))
            _ = try await t.daemon.waitFor(gid) { Int($0["downloadSpeed"]?.string ?? "") ?? 0 > 0 }
            let exposition = Exposition(try await scrape(t.daemon).text)
            #expect(exposition.samples[#"haul_downloads{state="active"}"#] == 1)
            #expect((exposition.samples["haul_download_speed_bytes_per_second"] ?? 0) > 0)
            #expect((exposition.samples["haul_downloaded_bytes_total"] ?? 0) > 0, "counted while the download runs")
            try await t.daemon.call("aria2.remove", [.string(gid)])
        }
    }

    @Test func needsTheSecretAsABearerToken() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            let refused = try await scrape(t.daemon)
            #expect(refused.status == 401)
            #expect(refused.text.hasPrefix("this daemon has an --rpc-secret"))
            #expect(refused.text.split(separator: "\n").count == 1)
            #expect(try await scrape(t.daemon, headers: [("Authorization", "Bearer wrong")]).status == 401)
            #expect(try await scrape(t.daemon, headers: [("Authorization", "Basic czNjcmV0")]).status == 401)
            let allowed = try await scrape(t.daemon, headers: [("Authorization", "Bearer s3cret")])
            #expect(allowed.status == 200)
            #expect(allowed.text.contains("# TYPE haul_downloads gauge"))
            // The RPC's origin rules: a page of another site may not read it, even with the secret.
            let page = try await scrape(t.daemon, headers: [("Authorization", "Bearer s3cret"), ("Origin", "http://evil.example")])
            #expect(page.status == 403)
            let host = try await scrape(t.daemon, headers: [("Authorization", "Bearer s3cret"), ("Host", "evil.example:\(t.daemon.endpoint.port)")])
            #expect(host.status == 403)
        }
    }

    @Test func answersWithoutASecretWhenNoneIsSet() async throws {
        try await withDaemon { t in
            let open = try await scrape(t.daemon)
            #expect(open.status == 200)
            #expect(Exposition(open.text).samples[#"haul_downloads{state="waiting"}"#] == 0)
            // A page of another site is refused, as on /jsonrpc.
            #expect(try await scrape(t.daemon, headers: [("Sec-Fetch-Site", "cross-site")]).status == 403)
        }
    }

    @Test(.enabled(if: promtool != nil || DaemonInteropTests.isCI))
    func promtoolAcceptsTheScrape() async throws {
        let promtool = try #require(Self.promtool, "promtool is missing: scripts/install-deps.sh --with-test-servers installs it")
        try await withDaemon { t in
            t.server.serve("/ok.bin", Route(content: testBytes(Self.size, seed: 4)))
            var flaky = Route(content: testBytes(Self.size, seed: 5))
            flaky.failFirst = 1
            flaky.retryAfter = "0"
            t.server.serve("/flaky.bin", flaky)
            for path in ["/ok.bin", "/flaky.bin"] {
                let gid = try await add(t.daemon, t.server.url(path))
                _ = try await t.daemon.waitFor(gid) { $0["status"]?.string == "complete" }
            }
            let text = try await scrape(t.daemon).text
            let file = t.dir.file("scrape.txt")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "\"$0\" check metrics < \"$1\" 2>&1", promtool, file]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "promtool: \(said)\n\(text)")
            #expect(said.isEmpty, "promtool's lint: \(said)")
        }
    }
}

/// A scrape read back: each sample by its name and labels (sorted, `name{a="x",b="y"}`), each
/// family's `# HELP` and `# TYPE`, and whatever breaks the text format.
struct Exposition {
    var samples: [String: Double] = [:]
    var help: [String: String] = [:]
    var types: [String: String] = [:]
    var problems: [String] = []

    init(_ text: String) {
        let name = #/[a-zA-Z_:][a-zA-Z0-9_:]*/#
        let comment = #/# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)/#
        let sample = #/([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (\S+)/#
        let label = #/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/#
        guard text.hasSuffix("\n") else {
            problems.append("the text does not end with a newline")
            return
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if let match = line.wholeMatch(of: comment) {
                let family = String(match.output.2)
                if match.output.1 == "HELP" {
                    if help.updateValue(String(match.output.3), forKey: family) != nil { problems.append("two HELP lines for \(family)") }
                } else {
                    guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(match.output.3) else {
                        problems.append("unknown type: \(line)")
                        continue
                    }
                    if types.updateValue(String(match.output.3), forKey: family) != nil { problems.append("two TYPE lines for \(family)") }
                }
                continue
            }
            guard let match = line.wholeMatch(of: sample), match.output.1.wholeMatch(of: name) != nil else {
                problems.append("not a sample line: \(line)")
                continue
            }
            let metric = String(match.output.1)
            let labels = match.output.2.map { $0.matches(of: label).map { "\($0.output.1)=\"\($0.output.2)\"" }.sorted() } ?? []
            let text = String(match.output.3)
            guard let value = Double(text) ?? ["+Inf": .infinity, "-Inf": -.infinity, "NaN": .nan][text] else {
                problems.append("not a number: \(line)")
                continue
            }
            let family = Self.family(of: metric, types: types)
            if types[family] == nil || help[family] == nil { problems.append("\(metric) has no TYPE or HELP before it") }
            let key = labels.isEmpty ? metric : "\(metric){\(labels.joined(separator: ","))}"
            if samples.updateValue(value, forKey: key) != nil { problems.append("two samples \(key)") }
        }
    }

    /// The family a sample belongs to: a histogram's `_bucket`, `_sum` and `_count` are its own.
    static func family(of metric: String, types: [String: String]) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where metric.hasSuffix(suffix) {
            let base = String(metric.dropLast(suffix.count))
            if types[base] == "histogram" || types[base] == "summary" { return base }
        }
        return metric
    }
}
