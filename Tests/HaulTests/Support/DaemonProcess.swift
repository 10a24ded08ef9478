import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// A `haul daemon` process on a free loopback port with its own state folder, as a user
/// would start it; its stderr goes to `daemon.log` in the state folder.
struct DaemonProcess {
    let process: HaulProcess
    let endpoint: DaemonEndpoint
    let stateDirectory: String

    var client: RPCClient { RPCClient(endpoint: endpoint) }
    var log: String { process.stderr }

    /// Starts `haul daemon --rpc-listen-port 0 --state-dir STATE ARGUMENTS` in `directory` and
    /// waits until it has written its `daemon.json`.
    static func start(
        state stateDirectory: String, in directory: String, _ arguments: [String] = [],
        environment: [String: String?] = [:]
    ) async throws -> DaemonProcess {
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        let log = (stateDirectory as NSString).appendingPathComponent("daemon.log")
        let process = try HaulProcess(
            ["daemon", "--rpc-listen-port", "0", "--state-dir", stateDirectory] + arguments,
            in: directory, stderrFile: log, environment: environment)
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if let endpoint = try? DaemonEndpoint.read(stateDirectory: stateDirectory), endpoint.pid == process.process.processIdentifier {
                return DaemonProcess(process: process, endpoint: endpoint, stateDirectory: stateDirectory)
            }
            guard process.process.isRunning else { throw Failure(description: "haul daemon exited: \(process.stderr)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.signal(SIGKILL)
        throw Failure(description: "haul daemon did not start within 20 s: \(process.stderr)")
    }

    /// Starts a daemon, runs `body` with it, and kills it if `body` throws (a test that fails
    /// halfway leaves no daemon behind). `body` stops it itself to check how it exits.
    static func with<T>(
        state stateDirectory: String, in directory: String, _ arguments: [String] = [],
        environment: [String: String?] = [:], _ body: (DaemonProcess) async throws -> T
    ) async throws -> T {
        let daemon = try await start(state: stateDirectory, in: directory, arguments, environment: environment)
        do {
            return try await body(daemon)
        } catch {
            try? await daemon.kill()
            throw error
        }
    }

    /// Calls a method with the daemon's secret.
    @discardableResult
    func call(_ method: String, _ params: [JSONValue] = []) async throws -> JSONValue {
        try await client.call(method, params)
    }

    /// `params` with the daemon's `token:SECRET` first, for calls inside a multicall.
    func tokenParams(_ params: [JSONValue]) -> JSONValue {
        .array((endpoint.secret.map { [JSONValue.string("token:\($0)")] } ?? []) + params)
    }

    /// SIGTERM, then waits for the exit status.
    func stop() async throws -> Int32 {
        process.signal(SIGTERM)
        return try await process.finish(timeout: .seconds(30)).status
    }

    /// kill -9, then waits until it is gone.
    func kill() async throws {
        guard process.process.isRunning else { return }
        process.signal(SIGKILL)
        _ = try await process.finish(timeout: .seconds(10))
    }

    /// Polls `tellStatus` until `condition` holds for the download, at most `timeout`.
    func waitFor(_ gid: String, timeout: Duration = .seconds(30), _ condition: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout
        while true {
            let status = try await call("aria2.tellStatus", [.string(gid)])
            if condition(status) { return status }
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "timed out waiting for \(gid); last status \(status)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The lines of its log that contain every one of `parts`, once one has appeared (at most
    /// `timeout`): the daemon writes its log as things happen, not before it answers.
    func logLines(containing parts: String..., timeout: Duration = .seconds(5)) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let lines = log.split(separator: "\n").map(String.init).filter { line in parts.allSatisfy { line.contains($0) } }
            if !lines.isEmpty || ContinuousClock.now >= deadline { return lines }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }
}

/// A fault server, a test folder and a daemon whose downloads go to `downloads/` in it.
struct DaemonFixture {
    let server: FaultServer
    let dir: TestDirectory
    let daemon: DaemonProcess

    var downloads: String { dir.file("downloads") }
}

/// Runs `body` with a fresh server and a daemon started with `arguments`, and stops both (and removes the folder) however
/// `body` ends. `quiet: false` leaves out `-q`, so the daemon logs what it shows by default.
func withDaemon(_ arguments: [String] = [], quiet: Bool = true, _ body: (DaemonFixture) async throws -> Void) async throws {
    let server = try await FaultServer.start()
    let dir = try TestDirectory()
    let daemon: DaemonProcess
    do {
        daemon = try await DaemonProcess.start(state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads")] + (quiet ? ["-q"] : []) + arguments)
    } catch {
        try? await server.shutdown()
        dir.remove()
        throw error
    }
    var failure: (any Error)?
    do { try await body(DaemonFixture(server: server, dir: dir, daemon: daemon)) } catch { failure = error }
    // A test may have killed it already.
    let wasRunning = daemon.process.process.isRunning
    let status = try? await daemon.stop()
    if failure == nil, wasRunning { #expect(status == 0, "the daemon exits 0 on SIGTERM") }
    try? await server.shutdown()
    dir.remove()
    if let failure { throw failure }
}
