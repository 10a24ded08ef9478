/// A finished upload: the server confirmed every byte of the file.
public struct UploadResult: Sendable, Hashable, Codable {
    /// The file sent.
    public var file: String
    /// Where the bytes went: the resumable upload's URL (tus, the IETF draft), or the `PUT`
    /// target (without credentials).
    public var location: String
    /// The protocol that carried them (never ``UploadProtocol/auto``).
    public var `protocol`: UploadProtocol
    /// The file's length, all of which the server holds.
    public var bytes: Int64
    /// Bytes sent by this run: less than ``bytes`` when an earlier run's upload was continued.
    public var bytesSent: Int64
    /// Why an earlier upload of the same file to the same URL was not continued ("the file
    /// changed since its upload began", "the server no longer has the upload"), when one was
    /// not; nil otherwise.
    public var restartReason: String?
}
