extension Mirror {
    /// What a run did: counts of files by what became of them, and the errors.
    public struct Summary: Sendable {
        /// Files copied for the first time (in a dry run: files a real run would fetch).
        public var new = 0
        /// Files copied before that changed on the server and were fetched again.
        public var updated = 0
        /// Files copied before that the server said are unchanged (no body sent).
        public var unchanged = 0
        /// Files removed because they are gone from the server (dry run: would be).
        public var deleted = 0
        /// Files (and listings) that failed.
        public var failed = 0
        /// Files in the way that this mirror did not write (left alone).
        public var skipped = 0
        /// Dry run: files copied before, which a real run would check with the server.
        public var toCheck = 0
        /// Files fetched and found to match the checksum file.
        public var verified = 0
        /// Files the checksum file does not list.
        public var unlisted = 0
        /// Bytes received for the files.
        public var bytesFetched: Int64 = 0
        /// Listings read.
        public var listingsRead = 0
        /// The run was stopped (``Mirror/stop()``) before it finished: nothing was deleted,
        /// and the next run continues.
        public var interrupted = false
        /// Why files and listings failed, one error each.
        public var errors: [DownloadError] = []

        public init() {}

        /// The counts as a JSON object (the errors left out).
        public var json: String {
            #"{"new":\#(new),"updated":\#(updated),"unchanged":\#(unchanged),"deleted":\#(deleted),"failed":\#(failed),"skipped":\#(skipped),"verified":\#(verified),"unlisted":\#(unlisted),"bytesFetched":\#(bytesFetched)}"#
        }
    }
}
