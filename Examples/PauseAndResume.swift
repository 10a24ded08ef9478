import Foundation
import Haul

/// APIAtAGlance.md and ResumeSemantics.md, the first process: pause and keep the token.
func pauseAndSaveToken() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        let task = try await downloader.download(DownloadRequest(url: "https://example.com/big.iso", file: "/tmp/big.iso"))
        try await Task.sleep(for: .seconds(5))
        if let token = await task.pause() {  // returns once every byte on disk is recorded
            try JSONEncoder().encode(token).write(to: URL(fileURLWithPath: "/tmp/big.iso.token"))
        }
    }
}

/// APIAtAGlance.md and ResumeSemantics.md, the second process: continue from the token.
func resumeFromToken() async throws {
    let data = try Data(contentsOf: URL(fileURLWithPath: "/tmp/big.iso.token"))
    let token = try JSONDecoder().decode(ResumeToken.self, from: data)
    try await Downloader.withDownloader(.init(stateDirectory: "/tmp/other-state")) { downloader in
        let task = try await downloader.download(resuming: token)
        let result = try await task.result()
        print(result.path, result.bytesFetched, "bytes fetched by this process")
    }
}

/// APIAtAGlance.md, errors.
func errors() async throws {
    let request = DownloadRequest(url: "https://example.com/big.iso", directory: "/tmp")
    do {
        try await Downloader.withDownloader(.init()) { downloader throws(DownloadError) in
            let task = try await downloader.download(request)
            _ = try await task.result()
        }
    } catch {
        switch error.kind {
        case .paused: print("paused; continue with", error.resumeToken?.destination ?? "a new download")
        case .io where error.reason == .diskFull: print("free some space in", error.path ?? "the folder")
        case .io: print(error.path ?? "", error.errorNumber ?? 0, error.message)
        case .http: print("the server answered", error.status ?? 0)
        default: print(error)  // one line: what failed, on which URL or path, and why
        }
    }
}
