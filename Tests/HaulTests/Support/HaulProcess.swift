import Foundation

/// The built `haul` binary, run as a user would.
struct HaulProcess {
    let process = Process()
    private let stderrPipe = Pipe()
    /// Where stderr goes instead of the pipe, for long-running processes that could fill it.
    private let stderrFile: String?
    /// Where stdout goes; nil sends it to /dev/null.
    private let stdoutFile: String?
    /// stderr goes to a handle given by the test (`/dev/full`), not read back.
    private let stderrGiven: Bool

    /// `.build/<triple>/debug/haul`, next to the test bundle, or `$HAUL_TEST_BINARY` (to check
    /// that a test fails on another build, say the last release).
    static var executable: String {
        if let chosen = ProcessInfo.processInfo.environment["HAUL_TEST_BINARY"], !chosen.isEmpty { return chosen }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("haul").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/haul").path
    }

    static let proxyVariables: Set<String> = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]

    /// - Parameter environment: variables set (or, with nil, unset) on top of the test's own,
    ///   from which the proxy variables are taken out.
    ///   - standardOutput, standardError: handles the output goes to instead (`/dev/full`).
    init(
        _ arguments: [String], in directory: String, stderrFile: String? = nil, stdoutFile: String? = nil,
        environment: [String: String?] = [:], standardOutput: FileHandle? = nil, standardError: FileHandle? = nil
    ) throws {
        self.stderrFile = stderrFile
        self.stdoutFile = stdoutFile
        stderrGiven = standardError != nil
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = arguments
        // Loopback tests go direct whatever proxy the machine's environment names.
        var merged = ProcessInfo.processInfo.environment.filter { !Self.proxyVariables.contains($0.key.lowercased()) }
        for (name, value) in environment { merged[name] = value }
        process.environment = merged
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        if let stderrFile {
            FileManager.default.createFile(atPath: stderrFile, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: stderrFile)
        } else {
            process.standardError = stderrPipe
        }
        if let stdoutFile {
            // A file, not a pipe: nothing blocks the process however much it prints before it is read.
            FileManager.default.createFile(atPath: stdoutFile, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: stdoutFile)
        } else {
            process.standardOutput = FileHandle.nullDevice
        }
        if let standardOutput { process.standardOutput = standardOutput }
        if let standardError { process.standardError = standardError }
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Waits (at most `timeout`) and returns the exit status and what went to stderr.
    func finish(timeout: Duration = .seconds(60)) async throws -> (status: Int32, stderr: String) {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                process.terminate()
                throw TimeoutError()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (process.terminationStatus, stderr)
    }

    /// What went to stderr (so far, when it goes to a file).
    var stderr: String {
        if stderrGiven { return "" }
        if let stderrFile { return (try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? "" }
        return String(decoding: stderrPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// What went to stdout so far ("" unless it goes to a file).
    var stdout: String {
        stdoutFile.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// The paths of the files the process has open now, as `/proc/<pid>/fd` names them (an
    /// unnamed file shows as its folder, `/#<inode>` and ` (deleted)`).
    var openFiles: [String] {
        let folder = "/proc/\(process.processIdentifier)/fd"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return descriptors.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\($0)") }
    }

    static func run(_ arguments: [String], in directory: String) async throws -> (status: Int32, stderr: String) {
        try await HaulProcess(arguments, in: directory).finish()
    }

    /// Runs to the end (at most `timeout`) and returns the exit status, stdout and stderr.
    static func capture(
        _ arguments: [String], in directory: String, environment: [String: String?] = [:],
        timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let stdoutFile = (NSTemporaryDirectory() as NSString).appendingPathComponent("haul-stdout-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: stdoutFile) }
        let haul = try HaulProcess(arguments, in: directory, stdoutFile: stdoutFile, environment: environment)
        let (status, stderr) = try await haul.finish(timeout: timeout)
        return (status, haul.stdout, stderr)
    }

    struct TimeoutError: Error {}
}

/// Polls `condition` every 10 ms for at most `timeout`, on a queue of its own: a test that
/// waits for a moment in a child process (a kill point) must not miss it while other tests hold
/// the few threads of the shared pool.
func waitUntil(timeout: Duration = .seconds(20), _ condition: () -> Bool) async throws -> Bool {
    try await withTaskExecutorPreference(pollingExecutor) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}

private let pollingExecutor = QueueExecutor("haul-test-polling")

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

/// What `read` returns once its byte count has stopped moving for 100 ms (at most 3 s): a server
/// may still be reading, and counting, what a request cut by the client had sent.
func settled<T>(_ read: () -> T, bytes: (T) -> Int64) async -> T {
    var last = read()
    for _ in 0..<30 {
        try? await Task.sleep(for: .milliseconds(100))
        let now = read()
        if bytes(now) == bytes(last) { return now }
        last = now
    }
    return last
}
