import Foundation
import Haul

/// README.md and ManagingDownloads.md.
func managingDownloads() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 5))
        let events = await manager.events()  // before restore(), which starts what was running at once
        Task { for await event in events { print(event) } }  // added, started, progress, paused, completed, failed, removed
        try await manager.restore()  // continue what a killed process left
        let iso = try await manager.add(DownloadRequest(url: "https://example.com/big.iso", directory: "."))
        try await manager.add(DownloadRequest(url: "https://example.com/big.iso.sig", directory: "."), after: [iso])
        await manager.waitUntilIdle()
        for download in await manager.downloads() { print(download.id, download.status, download.destination) }
        await manager.shutdown()
    }
}

/// ManagingDownloads.md, priorities and dependencies.
func priorities(downloader: Downloader) async throws {
    let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 5))
    let events = await manager.events()
    try await manager.restore()
    let image = try await manager.add(DownloadRequest(url: "https://example.com/disk.img", directory: "."), priority: 1)
    try await manager.add(DownloadRequest(url: "https://example.com/disk.img.sig", directory: "."), after: [image])
    for await event in events {
        if case .failed(let id, let error) = event { print(id, error) }
    }
}

/// Networks.md.
func networks() async throws {
    var request = DownloadRequest(url: "https://intranet.example/builds/app.tar.gz", directory: ".")
    request.network.proxy = ProxySettings.environment(ProcessInfo.processInfo.environment)
    request.network.tls.caCertificate = "/etc/company/ca.pem"
    request.network.useNetrc = true
    try await Downloader.withDownloader(.init()) { downloader in
        _ = try await downloader.download(request).result()
    }
}
