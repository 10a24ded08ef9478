import Haul

/// MirroringAFolderTree.md: a served tree copied, kept in sync, and its gone files removed.
func mirrorAFolderTree() async throws {
    try await Downloader.withDownloader(.init()) { downloader in
        var configuration = Mirror.Configuration(url: "https://example.com/pub/", directory: "/srv/pub")
        configuration.exclude = ["*.tmp"]
        configuration.deletesGone = true
        let summary = try await Mirror(configuration, downloader: downloader).run { event in
            print(event)  // "deleted a/b.txt", or a problem in one line
        }
        print(summary.new, "new,", summary.updated, "updated,", summary.unchanged, "unchanged")
    }
}

/// MirroringAFolderTree.md: a run stopped, to be continued by the next.
func stopAMirror(_ mirror: Mirror) async throws {
    let running = Task { try await mirror.run() }
    await mirror.stop()
    let summary = try await running.value
    print(summary.interrupted)  // true: the next run continues
}

/// README.md: a tree kept in sync, its gone files removed.
func mirrorATreeFromTheReadme(_ downloader: Downloader) async throws {
    var configuration = Mirror.Configuration(url: "https://example.com/pub/", directory: "/srv/pub")
    configuration.deletesGone = true
    let summary = try await Mirror(configuration, downloader: downloader).run { event in print(event) }
    print(summary.new, summary.updated, summary.unchanged, summary.deleted, summary.failed)
}
