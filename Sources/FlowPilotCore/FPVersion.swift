public enum FPVersion {
    public static let current = "0.1.0"
}
