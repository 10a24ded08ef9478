import Testing
@testable import Haul

@Suite("Content-Disposition")
struct ContentDispositionTests {
    @Test(
        "finds the file name",
        arguments: [
            (#"attachment; filename="report.pdf""#, "report.pdf"),
            ("attachment; filename=plain.txt", "plain.txt"),
            (#"inline; filename="inline.png""#, "inline.png"),
            (#"form-data; name="f"; filename="x.bin""#, "x.bin"),
            (#"ATTACHMENT; FileName="Upper.TXT""#, "Upper.TXT"),
            (#"attachment;filename="tight.txt""#, "tight.txt"),
            (#"attachment; filename = "spaced.txt" ; size=3"#, "spaced.txt"),
            (#"attachment; filename="quoted \"escaped\".txt""#, #"quoted "escaped".txt"#),
            (#"attachment; filename="a;b.txt""#, "a;b.txt"),
            (#"attachment; note="x; filename=evil.exe"; filename="good.txt""#, "good.txt"),
            (#"attachment; filename="C:\\dir\\f.txt""#, #"C:\dir\f.txt"#),
            ("attachment; filename=my file name.pdf; size=10", "my file name.pdf"),
            ("attachment; filename=a=b.txt", "a=b.txt"),
            (#"attachment; filename="../../etc/passwd""#, "../../etc/passwd"),
            (#"attachment; filename="€uro.txt""#, "€uro.txt"),
            (#"attachment; filename="unterminated.txt"#, "unterminated.txt"),
            (#"attachment; filename="first.txt"; filename="second.txt""#, "first.txt"),
            (#"filename="no-type.txt""#, "no-type.txt"),
            // RFC 8187 extended values
            ("attachment; filename*=UTF-8''%E2%82%AC%20rates.txt", "€ rates.txt"),
            ("attachment; filename*=utf-8''lower.txt", "lower.txt"),
            ("attachment; filename*=UTF-8'en'with%20lang.txt", "with lang.txt"),
            ("attachment; filename*=iso-8859-1'de'%E4pfel.txt", "äpfel.txt"),
            (#"attachment; filename="fallback.txt"; filename*=UTF-8''%C3%A9t%C3%A9.txt"#, "été.txt"),
            (#"attachment; filename*=UTF-8''wins.txt; filename="loses.txt""#, "wins.txt"),
            (#"attachment; FILENAME*=UTF-8''caps.txt"#, "caps.txt"),
            (#"attachment; filename*="UTF-8''quoted%20ext.txt""#, "quoted ext.txt"),
            ("attachment; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd", "../../etc/passwd"),
            // a broken filename* falls back to filename
            (#"attachment; filename*=UTF-8''%ZZ.txt; filename="safe.txt""#, "safe.txt"),
            (#"attachment; filename*=UTF-8''%E2%82.txt; filename="utf8.txt""#, "utf8.txt"),
            (#"attachment; filename*=KOI8-R''%C1.txt; filename="koi.txt""#, "koi.txt"),
            (#"attachment; filename*=no-quotes.txt; filename="plain.txt""#, "plain.txt"),
            (#"attachment; filename*=UTF-8''; filename="empty-ext.txt""#, "empty-ext.txt"),
        ])
    func filename(value: String, expected: String) {
        #expect(ContentDisposition.filename(from: value) == expected)
    }

    @Test(
        "finds no file name",
        arguments: [
            "",
            "attachment",
            "inline",
            "attachment;",
            #"attachment; filename="""#,
            "attachment; filename=",
            "attachment; filename=  ; size=1",
            #"attachment; name="field""#,
            #"attachment; xfilename="x.txt""#,
            "attachment; filename*=UTF-8''%",
            "attachment; filename*=UTF-8''raw space.txt",
            ";;;===",
        ])
    func none(value: String) {
        #expect(ContentDisposition.filename(from: value) == nil)
    }

    @Test func rawNameIsSanitizedLater() throws {
        let raw = try #require(ContentDisposition.filename(from: #"attachment; filename="../../etc/passwd""#))
        #expect(FileNameSanitizer.sanitize(raw) == "passwd")
    }

    @Test func parametersKeepOrderAndLowercaseNames() {
        let parameters = ContentDisposition.parameters(in: #"inline; A=1; b="2;3""#)
        #expect(parameters.map(\.name) == ["a", "b"])
        #expect(parameters.map(\.value) == ["1", "2;3"])
    }
}
