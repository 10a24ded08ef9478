import Testing
@testable import Haul

/// The lifecycle of one managed download as a plain value: every transition, no I/O.
@Suite struct DownloadLifecycleTests {
    typealias Action = DownloadLifecycle.Action

    static let result = DownloadResult(path: "/tmp/f", bytes: 10, bytesFetched: 10, wasAlreadyComplete: false)
    static let failure = DownloadError.network("connection reset")

    func queued() -> DownloadLifecycle { DownloadLifecycle.added(paused: false).0 }

    func running() -> DownloadLifecycle {
        var lifecycle = queued()
        _ = lifecycle.start()
        return lifecycle
    }

    @Test func addingAnnouncesAndStoresTheStatus() {
        let (queued, actions) = DownloadLifecycle.added(paused: false)
        #expect(queued.status == .queued && actions == [.persist(.queued), .announce(.added)])
        let (paused, held) = DownloadLifecycle.added(paused: true)
        #expect(paused.status == .paused && held == [.persist(.paused), .announce(.added)])
    }

    @Test func onlyAQueuedDownloadStarts() {
        var lifecycle = queued()
        #expect(lifecycle.start() == [.start(attempt: 1), .persist(.running), .announce(.started)])
        #expect(lifecycle.start() == [], "running already")
        var paused = DownloadLifecycle.added(paused: true).0
        #expect(paused.start() == [])
        var done = running()
        _ = done.attemptEnded(1, .success(Self.result))
        #expect(done.start() == [])
    }

    @Test(arguments: [
        (Result<DownloadResult, DownloadError>.success(result), DownloadStatus.completed, Action.announce(.completed)),
        (.failure(failure), .failed, .announce(.failed)),
        // A transfer that stops by itself with "cancelled" (no stop asked) counts as paused.
        (.failure(.cancelled), .paused, .announce(.paused)),
    ])
    func anAttemptEndsWithOneTerminalEvent(outcome: Result<DownloadResult, DownloadError>, status: DownloadStatus, event: Action) {
        var lifecycle = running()
        let actions = lifecycle.attemptEnded(1, outcome)
        #expect(lifecycle.status == status)
        #expect(actions == [.releaseHostSlot, .persist(status), event])
        #expect(lifecycle.attemptEnded(1, outcome) == [], "an attempt ends once")
    }

    @Test func aStaleAttemptIsIgnored() {
        var lifecycle = running()
        _ = lifecycle.pause()
        _ = lifecycle.attemptEnded(1, .failure(.cancelled))
        _ = lifecycle.resume()
        _ = lifecycle.start()
        #expect(lifecycle.attemptEnded(1, .success(Self.result)) == [], "attempt 1 is over; 2 runs")
        #expect(lifecycle.runningAttempt?.number == 2)
    }

    @Test func pauseDuringTheFirstContactOrTheTransferSavesAndHolds() {
        var lifecycle = running()
        #expect(lifecycle.pause() == [.stopTransfer])
        #expect(lifecycle.pause() == [], "already stopping")
        #expect(lifecycle.status == .running, "until the transfer has stopped")
        #expect(lifecycle.attemptEnded(1, .failure(.cancelled)) == [.releaseHostSlot, .persist(.paused), .announce(.paused)])
        #expect(lifecycle.status == .paused)
    }

    @Test func aPauseThatLosesTheRaceToTheEndKeepsTheEnd() {
        var completed = running()
        _ = completed.pause()
        #expect(completed.attemptEnded(1, .success(Self.result)) == [.releaseHostSlot, .persist(.completed), .announce(.completed)])
        var failed = running()
        _ = failed.pause()
        #expect(failed.attemptEnded(1, .failure(Self.failure)) == [.releaseHostSlot, .persist(.failed), .announce(.failed)])
    }

    @Test func resumeDuringAPauseWaitsForATurnAgain() {
        var lifecycle = running()
        _ = lifecycle.pause()
        #expect(lifecycle.resume() == [])
        #expect(lifecycle.attemptEnded(1, .failure(.cancelled)) == [.releaseHostSlot, .persist(.queued), .announce(.paused)])
        #expect(lifecycle.isQueued)
    }

    @Test func queuedAndPausedDownloadsPauseAndResumeWithoutATransfer() {
        var lifecycle = queued()
        #expect(lifecycle.pause() == [.persist(.paused), .announce(.paused)])
        #expect(lifecycle.pause() == [])
        #expect(lifecycle.resume() == [.persist(.queued)])
        #expect(lifecycle.resume() == [])
    }

    @Test func aFailedDownloadResumesAndACompletedOneIsRequeued() {
        var failed = running()
        _ = failed.attemptEnded(1, .failure(Self.failure))
        #expect(failed.resume() == [.persist(.queued)] && failed.isQueued)
        var completed = running()
        _ = completed.attemptEnded(1, .success(Self.result))
        #expect(completed.resume() == [], "resume leaves a completed download alone")
        #expect(completed.requeue() == [.persist(.queued)] && completed.isQueued)
    }

    @Test func stopsGrowStrongerNeverWeaker() {
        var lifecycle = running()
        #expect(lifecycle.pause() == [.stopTransfer])
        #expect(lifecycle.cancel() == [])
        #expect(lifecycle.shutdown() == [], "a shutdown does not weaken a cancel")
        #expect(lifecycle.attemptEnded(1, .failure(.cancelled)) == [.releaseHostSlot, .discardPartial, .persist(.failed), .announce(.failed)])
        #expect(lifecycle.error == .cancelled)
        #expect(lifecycle.cancel() == [], "already cancelled")
    }

    @Test func removeStopsThenForgetsWithOneEvent() {
        var running = running()
        #expect(running.remove() == [.stopTransfer])
        #expect(running.attemptEnded(1, .failure(.cancelled)) == [.releaseHostSlot, .discardPartial, .forget, .announce(.removed)])
        var finishedFirst = self.running()
        _ = finishedFirst.remove()
        // It completed before the stop took: the file stays, the download goes.
        #expect(finishedFirst.attemptEnded(1, .success(Self.result)) == [.releaseHostSlot, .forget, .announce(.removed)])
    }

    @Test func removeWhilePausedOrFinished() {
        var paused = DownloadLifecycle.added(paused: true).0
        #expect(paused.remove() == [.discardPartial, .forget, .announce(.removed)])
        var completed = running()
        _ = completed.attemptEnded(1, .success(Self.result))
        #expect(completed.remove() == [.forget, .announce(.removed)], "a completed file is kept")
        var failed = running()
        _ = failed.attemptEnded(1, .failure(Self.failure))
        #expect(failed.remove() == [.discardPartial, .forget, .announce(.removed)])
    }

    @Test func cancelWhileWaiting() {
        var lifecycle = DownloadLifecycle.added(paused: true).0
        #expect(lifecycle.cancel() == [.discardPartial, .persist(.failed), .announce(.failed)])
        #expect(lifecycle.error == .cancelled)
    }

    @Test func shutdownLeavesTheRowRunningForTheNextRestore() {
        var lifecycle = running()
        #expect(lifecycle.shutdown() == [.stopTransfer])
        // No persist: the row keeps "running", so the next process continues it first.
        #expect(lifecycle.attemptEnded(1, .failure(.cancelled)) == [.releaseHostSlot, .announce(.paused)])
        let restored = DownloadLifecycle(restoring: .running)
        #expect(restored.isQueued && restored.restoredRunning)
        var restarted = restored
        _ = restarted.start()
        #expect(!restarted.restoredRunning)
    }

    @Test(arguments: [DownloadStatus.queued, .paused, .completed, .failed])
    func restoreAfterACrashKeepsWhatTheStoreSaid(status: DownloadStatus) {
        let lifecycle = DownloadLifecycle(restoring: status, result: Self.result, error: Self.failure)
        #expect(lifecycle.status == status)
        #expect(!lifecycle.restoredRunning)
    }

    @Test func restartForANewRequestQueuesAgain() {
        var lifecycle = running()
        #expect(lifecycle.restart() == [.stopTransfer])
        #expect(lifecycle.attemptEnded(1, .failure(.cancelled)) == [.releaseHostSlot, .persist(.queued), .announce(.paused)])
        #expect(lifecycle.isQueued)
    }

    @Test func aFailedDependencyFailsOnlyAQueuedDownload() {
        let error = DownloadError.dependencyFailed(DownloadID(rawValue: 7), reason: "404")
        var queued = queued()
        #expect(queued.dependencyFailed(error) == [.persist(.failed), .announce(.failed)])
        var paused = DownloadLifecycle.added(paused: true).0
        #expect(paused.dependencyFailed(error) == [])
        var running = running()
        #expect(running.dependencyFailed(error) == [])
    }

    @Test func theSlotIsGivenBackOnceWhenTheBytesAreIn() {
        var lifecycle = running()
        #expect(lifecycle.holdsSlot)
        #expect(lifecycle.transferred(1) == [.releaseHostSlot])
        #expect(!lifecycle.holdsSlot)
        #expect(lifecycle.transferred(1) == [])
        #expect(
            lifecycle.attemptEnded(1, .success(Self.result)) == [.persist(.completed), .announce(.completed)],
            "the slot went back already")
    }

    @Test func aStoreFailureFailsWaitingDownloadsInMemory() {
        var lifecycle = queued()
        let error = DownloadError.io("disk full")
        #expect(lifecycle.fail(error) == [.announce(.failed)])
        #expect(lifecycle.error == error)
    }
}
