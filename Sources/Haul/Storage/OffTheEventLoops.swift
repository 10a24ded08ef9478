import NIOPosix

/// Runs blocking file work on NIO's pool of threads for blocking I/O. Swift's tasks here run
/// on the event loops (Haul makes them the global executor), where a long read would hold up
/// every connection of the loop.
func offTheEventLoops<T: Sendable>(_ work: @escaping @Sendable () throws(DownloadError) -> T) async throws(DownloadError) -> T {
    let result: Result<T, DownloadError>
    do {
        result = try await NIOThreadPool.singleton.runIfActive { () -> Result<T, DownloadError> in
            do throws(DownloadError) { return .success(try work()) } catch { return .failure(error) }
        }
    } catch {
        throw .io("cannot run file work off the event loops: \(error)")
    }
    return try result.get()
}
