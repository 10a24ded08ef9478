import NIOPosix

/// Runs blocking file work on NIO's pool of threads for blocking I/O, not on Swift's pool of as
/// many threads as cores (nor on an event loop, where a long read would hold up every
/// connection of the loop). A task cancelled before the work ran throws ``DownloadError/cancelled``.
func offTheEventLoops<T: Sendable>(_ work: @escaping @Sendable () throws(DownloadError) -> T) async throws(DownloadError) -> T {
    let result: Result<T, DownloadError>
    do {
        result = try await NIOThreadPool.singleton.runIfActive { () -> Result<T, DownloadError> in
            do throws(DownloadError) { return .success(try work()) } catch { return .failure(error) }
        }
    } catch is CancellationError {
        // A stop (a pause, a segment given up), not a failure of the file.
        throw .cancelled
    } catch {
        throw .io("cannot run file work off the event loops: \(error)")
    }
    return try result.get()
}
