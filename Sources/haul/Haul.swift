import ArgumentParser
import Haul

@main
struct HaulCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "haul",
        abstract: "A resumable HTTP(S) download manager: interrupt it any way you like, rerun, lose nothing.",
        version: HaulVersion.string,
        subcommands: [GetCommand.self, DaemonCommand.self, AddCommand.self, ListCommand.self, StatusCommand.self,
                      PauseCommand.self, ResumeCommand.self, RemoveCommand.self, WaitCommand.self, WatchCommand.self,
                      ShutdownCommand.self],
        defaultSubcommand: nil)
}
