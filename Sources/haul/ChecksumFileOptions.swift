import ArgumentParser
import Foundation
import Haul

/// `--checksum-file` and `--require-checksum`, which `haul get` and `haul mirror` share: the
/// files a `SHA256SUMS`-style list names are verified before they get their final name.
struct ChecksumFileOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Verify each file this list names (SHA256SUMS-style: 'HEX  NAME' or 'SHA256 (NAME) = HEX'; md5, sha-1, sha-256, sha-512): a path, or an http(s) URL fetched first.",
            valueName: "file"))
    var checksumFile: String?

    @Flag(help: "Fail each file the --checksum-file does not list: nothing is saved for it.")
    var requireChecksum = false

    func validate() throws {
        if requireChecksum && checksumFile == nil { throw ValidationError("--require-checksum needs --checksum-file") }
    }

    /// The list, read (or fetched with `template`'s network options) once; nil without
    /// `--checksum-file`. A list that cannot be read is one line of error and ends the command.
    func load(template: DownloadRequest, downloader: Downloader) async throws -> ChecksumFile? {
        guard let checksumFile else { return nil }
        do throws(DownloadError) {
            return try await ChecksumFile.load(checksumFile, template: template, downloader: downloader)
        } catch {
            Terminal.error(error.description)
            do { try await downloader.shutdown() } catch {}
            throw ExitCode(ExitStatus.code(for: [error]))
        }
    }
}
