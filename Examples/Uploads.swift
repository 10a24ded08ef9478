import Foundation
import Haul

/// UploadingFiles.md: a file to a tus server, continued by a rerun after any interruption.
func uploadAFile() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        var request = UploadRequest(file: "/tmp/video.mp4", url: "https://uploads.example/files")
        request.protocol = .auto  // tus or the IETF draft if the server speaks one, else one PUT
        request.rateLimit = 4 << 20
        let task = try await downloader.upload(request)
        for await progress in task.progress {
            if let reason = progress.restartReason { print(reason) }
            print(progress.bytesSent, "of", progress.totalBytes)
        }
        let result = try await task.result()
        print(result.location, result.protocol, result.bytesSent, "bytes sent by this run")
    }
}

/// UploadingFiles.md: an upload paused in one process and continued from its token in another.
func pauseAnUploadAndContinueItElsewhere(_ task: UploadTask, _ downloader: Downloader) async throws {
    // One process:
    if let token = await task.pause() {
        try JSONEncoder().encode(token).write(to: URL(fileURLWithPath: "/tmp/video.upload.json"))
    }
    // Another, later:
    let saved = try Data(contentsOf: URL(fileURLWithPath: "/tmp/video.upload.json"))
    let token = try JSONDecoder().decode(UploadResumeToken.self, from: saved)
    let task = try await downloader.upload(resuming: token)
    _ = task
}

/// UploadingFiles.md: uploads queued with downloads in a manager.
func queueAnUpload(_ downloader: Downloader) async throws {
    let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 2))
    try await manager.restore()  // the queue of an earlier run, uploads included
    let id = try await manager.addUpload(UploadRequest(file: "/tmp/video.mp4", url: "https://uploads.example/files"), priority: 1)
    await manager.pause(id)  // a resumable upload keeps what the server holds
    await manager.resume(id)  // and goes on from the server's offset
    await manager.waitUntilIdle()
    if let upload = await manager.upload(id), let result = upload.result { print(upload.status, result.location) }
}
