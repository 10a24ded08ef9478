/// Times kept inside values that are copied and changed often (the manager's entries, a
/// transfer's speed meter): a `ContinuousClock.Instant` has no layout known when Haul is
/// compiled, so a value holding one is copied, moved and looked at through the runtime (with
/// allocations); a `Duration` after one process-wide instant has a fixed layout.
enum ProcessTime {
    static let origin = ContinuousClock.now

    /// Now, as a time after ``origin``.
    static var now: Duration { ContinuousClock.now - origin }

    /// `instant` as a time after ``origin``.
    static func since(_ instant: ContinuousClock.Instant) -> Duration { instant - origin }

    /// The instant a time after ``origin`` stands for.
    static func instant(_ time: Duration) -> ContinuousClock.Instant { origin + time }
}
