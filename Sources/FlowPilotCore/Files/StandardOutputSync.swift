import Foundation

/// Standard output redirected to a file (`fpctl warm … > run.json`, which a
/// later `--resume` reads) is synced when the command is done with it, like
/// every file fpctl publishes; a pipe or a terminal has nothing to sync.
public enum StandardOutputSync {
    public static func sync() {
        var st = stat()
        guard fstat(STDOUT_FILENO, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return }
        _ = Platform.syncData(STDOUT_FILENO)
    }
}
