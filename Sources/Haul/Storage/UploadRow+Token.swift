import Foundation

extension UploadResumeToken {
    /// The token for the upload `row` records; nil when the server has made no upload for it
    /// yet (nothing to continue) or it is not resumable.
    init?(_ row: UploadRow) {
        guard let location = row.location, row.protocol == .tus || row.protocol == .ietf else { return nil }
        self.init(
            file: row.file, url: row.url, protocol: row.protocol, location: location, length: row.identity.length,
            modified: row.identity.modified, sample: row.identity.sample,
            ietfInteropVersion: row.protocol == .ietf ? row.ietfVersion : nil)
    }
}

extension UploadRow {
    /// The row a store keeps for the upload `token` describes, as of `now`.
    init(_ token: UploadResumeToken, now: Date = Date()) {
        self.init(
            file: token.file, url: token.url, protocol: token.protocol, location: token.location,
            ietfInteropVersion: token.protocol == .ietf ? token.ietfInteropVersion : nil,
            identity: UploadFile.Identity(length: token.length, modified: token.modified, sample: token.sample),
            createdAt: now, updatedAt: now)
    }
}
