import Foundation
import Haul

/// README.md, "The library".
func library() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        var request = DownloadRequest(url: "https://example.com/big.iso", directory: "/tmp")
        request.checksum = try Checksum(parsing: "sha-256=…")
        let task = try await downloader.download(request)
        Task { for await p in task.progress { print(p.bytesDone, p.totalBytes ?? -1, p.bytesPerSecond) } }
        let result = try await task.result()  // pause(), resume(), cancel() on `task`
        print(result.path)
    }
}

/// Haul.md, the overview.
func overview() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        let task = try await downloader.download(DownloadRequest(url: "https://example.com/f.iso", directory: "."))
        let result = try await task.result()
        print(result.path)
    }
}

/// APIAtAGlance.md, progress.
func watchProgress() async throws {
    try await Downloader.withDownloader(.init(stateDirectory: "/tmp/haul-state")) { downloader in
        var request = DownloadRequest(url: "https://example.com/big.iso", file: "/tmp/big.iso")
        request.connections = 4  // the library's default is 1; `haul get` uses 4
        let task = try await downloader.download(request)
        for await progress in task.progress {
            let percent = progress.fraction.map { String(format: "%.0f%%", $0 * 100) } ?? "?"
            print(percent, progress.bytesPerSecond, progress.eta ?? .zero, progress.note ?? "")
        }
        let result = try await task.result()
        print(result.path, result.bytes, result.bytesFetched, result.wasAlreadyComplete)
    }
}

/// ResumeSemantics.md, several sources.
func mirrors() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        var request = DownloadRequest(
            sources: [.init(uri: "https://a.example.org/f.iso"), .init(uri: "https://b.example.net/f.iso")],
            file: "/tmp/f.iso")
        request.connections = 8  // one connection would use the first source only
        let result = try await downloader.download(request).result()
        print(result.path)
    }
}
