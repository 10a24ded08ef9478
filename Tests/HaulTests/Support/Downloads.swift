import Foundation
import HaulTestSupport
@testable import Haul

/// Runs downloads against a throwaway state folder with a fast clock.
struct Harness {
    let directory: TestDirectory
    let clock = RecordingClock()
    var stallTimeout: Duration = .seconds(5)

    init() throws { directory = try TestDirectory() }

    /// A harness on a folder made elsewhere.
    init(directory: TestDirectory) { self.directory = directory }

    var stateDirectory: String { directory.file("state") }

    func downloader(saveCookies: String? = nil) throws -> Downloader {
        var configuration = Downloader.Configuration(stateDirectory: stateDirectory)
        configuration.saveCookies = saveCookies
        configuration.clock = clock
        configuration.stallTimeout = stallTimeout
        configuration.random = { 0.5 }
        return try Downloader(configuration)
    }

    func request(_ url: String, file name: String? = nil, _ configure: (inout DownloadRequest) -> Void = { _ in }) -> DownloadRequest {
        var request =
            name.map { DownloadRequest(url: url, file: directory.file($0)) }
            ?? DownloadRequest(url: url, directory: directory.file("out"))
        request.retryWait = .milliseconds(10)
        configure(&request)
        return request
    }

    /// Downloads and returns the outcome, shutting the downloader down.
    func download(_ request: DownloadRequest) async throws -> Result<DownloadResult, DownloadError> {
        let downloader = try downloader()
        let result: Result<DownloadResult, DownloadError>
        do throws(DownloadError) { result = .success(try await downloader.download(request).result()) } catch { result = .failure(error) }
        try await downloader.shutdown()
        return result
    }

    func record(for path: String) async throws -> DownloadRow? {
        try await Store(directory: stateDirectory).row(path: path)
    }

    func remove() { directory.remove() }
}

/// Downloads `route` into `f.bin` of `harness`, and writes `theirs` at `f.bin` once the
/// download's bytes are being written (its destination is settled by then: a file there earlier
/// would be stepped around instead).
func downloadWhileAFileAppears(
    _ route: Route, theirs: [UInt8], in harness: Harness,
    _ configure: (inout DownloadRequest) -> Void = { _ in }
) async throws -> Result<DownloadResult, DownloadError> {
    let server = try await FaultServer.start()
    server.serve("/f.bin", route)
    let downloader = try harness.downloader()
    let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin", configure))
    for await progress in task.progress where progress.bytesDone > 0 { break }
    try harness.directory.write("f.bin", theirs)
    let result: Result<DownloadResult, DownloadError>
    do throws(DownloadError) { result = .success(try await task.result()) } catch { result = .failure(error) }
    try await downloader.shutdown()
    try await server.shutdown()
    return result
}
