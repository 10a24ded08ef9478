import Foundation

/// The built `haul` binary, run as a user would.
struct HaulProcess {
    let process = Process()
    private let stderrPipe = Pipe()

    /// `.build/<triple>/debug/haul`, next to the test bundle.
    static var executable: String {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("haul").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/haul").path
    }

    init(_ arguments: [String], in directory: String) throws {
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardError = stderrPipe
        process.standardOutput = FileHandle.nullDevice
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
        let text = String(decoding: stderrPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, text)
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    static func run(_ arguments: [String], in directory: String) async throws -> (status: Int32, stderr: String) {
        try await HaulProcess(arguments, in: directory).finish()
    }

    struct TimeoutError: Error {}
}

/// Polls `condition` every 10 ms for at most `timeout`.
func waitUntil(timeout: Duration = .seconds(20), _ condition: () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}
