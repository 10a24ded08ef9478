import ArgumentParser
import CHaulSystem
import Haul
import NIOCore

@main
struct HaulCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "haul",
        abstract: "A resumable HTTP(S) download manager: interrupt it any way you like, rerun, lose nothing.",
        version: HaulVersion.string,
        subcommands: [
            GetCommand.self, PutCommand.self, MirrorCommand.self, DaemonCommand.self, AddCommand.self, ListCommand.self, StatusCommand.self,
            PauseCommand.self, ResumeCommand.self, RemoveCommand.self, WaitCommand.self, WatchCommand.self,
            ShutdownCommand.self,
        ],
        defaultSubcommand: nil)

    static func main() async {
        // Swift Concurrency's jobs stay on its own pool, not on NIO's event loops
        // (`NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`).
        // That call looks the runtime's hook up by name, which the release binary (the standard
        // library linked in statically) does not export, so it only ever took effect in debug
        // builds. Installed by hand in the release binary (2026-11-27), the event loops ran a
        // mirror's resync of 5,005 files in 0.26-0.28 s against 0.22-0.23 s without, and
        // 10,000 small files no faster: blocking file work on two event loops holds up the network.
        // Two malloc arenas instead of one a thread, and big buffers (a read off the network)
        // straight from and back to the system: a long download's memory stays flat.
        haul_tune_malloc(128 << 10)
        NIOSingletons.groupLoopCountSuggestion = eventLoopCount(cores: System.coreCount)
        if var command = parsedOnItsOwn(Array(CommandLine.arguments.dropFirst())) {
            do { try await command.run() } catch { exit(withError: error) }
            return
        }
        await main(nil)
    }

    /// NIO's event loops for a machine of `cores` (NIO would make one a core): one for every two
    /// cores. A download's work is about half on the event loops (sockets, TLS, HTTP) and half on
    /// Swift's own pool (files, the store, the manager), which has a thread a core too. On two
    /// cores one loop instead of two cost 10,000 small HTTPS files a tenth less CPU, and one big
    /// file over four connections no time (docs/ARCHITECTURE.md, "The network side").
    static func eventLoopCount(cores: Int) -> Int { max(1, cores / 2) }

    /// The commands of most short runs, parsed on their own (``parsedOnItsOwn(_:)``).
    static let parsedAlone: [any AsyncParsableCommand.Type] = [GetCommand.self, PutCommand.self, MirrorCommand.self]

    /// `haul get …`, `haul put …` and `haul mirror …` parsed by their own command rather than
    /// through this one. A parse from here builds the tree of every command, then the named
    /// command's arguments (a reflection of each of its forty-odd options) twice more only to
    /// learn whether it takes the rest of the line whole: 4 ms of the 24 ms of CPU of a one-byte
    /// `put`. Nil for any other command and for a line that does not parse (a help request, a
    /// mistake): that goes through `main` as before, which says it in the same words.
    static func parsedOnItsOwn(_ arguments: [String]) -> (any AsyncParsableCommand)? {
        guard let name = arguments.first,
            let type = parsedAlone.first(where: { $0.configuration.commandName == name })
        else { return nil }
        return try? type.parse(Array(arguments.dropFirst()))
    }
}
