import ArgumentParser
import CHaulSystem
import Haul
import NIOCore
import NIOPosix

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
        // Swift Concurrency's jobs run on NIO's event loops: the transfers' awaits on the
        // network resume where the network already is, instead of hopping to another pool for
        // every request (a list of small files is mostly such hops). This is the first thing
        // the program does, on the main thread, before any other task.
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        // Two malloc arenas instead of one a thread, and big buffers (a read off the network)
        // straight from and back to the system: a long download's memory stays flat.
        haul_tune_malloc(128 << 10)
        await main(nil)
    }
}
