import Foundation
import HaulTestSupport
import Testing

@Suite struct ZZTempBigTests {
    func rss() -> String {
        (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8))?.split(separator: "\n").filter { $0.hasPrefix("VmHWM") || $0.hasPrefix("VmRSS") }.joined(separator: " ") ?? ""
    }
    func curl(_ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
    @Test func big() async throws {
        let server = try await FaultServer.start()
        let content = [UInt8](repeating: 7, count: 64 << 20)
        print("before", rss())
        server.serve("/big", Route(content: content))
        print("after serve", rss())
        print(try curl(["-s", "-o", "/dev/null", server.url("/nothing")]), "warm", rss())
        print(try curl(["-s", "-o", "/dev/null", "-w", "%{speed_download}", server.url("/big")]), "fast", rss())
        print(try curl(["-s", "-o", "/dev/null", "-w", "%{speed_download}", server.url("/big")]), "fast", rss())
        let sampler = Task { for _ in 0..<12 { try await Task.sleep(for: .milliseconds(250)); print("mid", rss()) } }
        print(try curl(["-s", "-o", "/dev/null", "--limit-rate", "20M", "-w", "%{http_code} %{size_download}\n", server.url("/big")]))
        _ = try? await sampler.value
        print("after limited", rss())
        try await server.shutdown()
    }
}
