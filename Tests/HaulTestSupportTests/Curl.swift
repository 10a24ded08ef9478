import Foundation

/// What one curl run gave: its exit code, the body, the `-w` text and its error line.
struct CurlResult: CustomStringConvertible {
    /// curl's exit code: 0 ok, 5 proxy not resolved, 7 cannot connect, 22 HTTP error with
    /// `--fail`, 35 TLS handshake, 56 receive failure, 60 peer certificate not trusted, 97 SOCKS…
    var exitCode: Int32
    var body: Data
    /// What `-w` printed (by default the status code).
    var writeOut: String
    /// curl's stderr (`-sS`: only the error line, e.g. `curl: (60) SSL certificate problem: …`).
    var error: String

    var text: String { String(decoding: body, as: UTF8.self) }
    var status: Int? { Int(writeOut.split(separator: " ").first ?? "") }

    var description: String { "curl exit \(exitCode), -w '\(writeOut)', stderr: \(error.trimmingCharacters(in: .whitespacesAndNewlines))" }
}

/// Runs `curl -sS --max-time 10 ARGUMENTS`, body to a temp file, `-w` to stdout.
///
/// - Parameter writeOut: curl's `-w` format; `%{http_code}` (000 when no answer) by default.
func curl(_ arguments: [String], writeOut: String = "%{http_code}") throws -> CurlResult {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let bodyURL = scratch.appendingPathComponent("body")
    let outURL = scratch.appendingPathComponent("out"), errURL = scratch.appendingPathComponent("err")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
    defer { try? out.close(); try? err.close() }

    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["curl", "-sS", "--max-time", "10", "-o", bodyURL.path, "-w", writeOut] + arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = err
    try process.run()
    process.waitUntilExit()
    return CurlResult(
        exitCode: process.terminationStatus,
        body: (try? Data(contentsOf: bodyURL)) ?? Data(),
        writeOut: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
        error: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "")
}

/// True if `name` runs from `PATH` (curl for these tests).
func isInstalled(_ name: String) -> Bool {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    return path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(name)") }
}

/// Whether a suite that needs `binary` runs: when it is installed, and always in CI (env CI set),
/// where a missing server must fail loudly rather than skip the tests that lean on it.
func runsWith(_ binary: String?) -> Bool {
    (binary != nil || ProcessInfo.processInfo.environment["CI"] != nil) && isInstalled("curl")
}
