// JSON text for the harness's Java programs (the admin program, the recorder, the consumer-group
// member), compiled beside each of them: they print JSON lines by hand, so that no JSON library
// has to match every kafka-clients release they are built against.

final class JsonText {
    private JsonText() {
    }

    /** `text` as a JSON string: quotes and backslashes escaped, control characters as \\u; a
     *  null as the string "null". */
    static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : String.valueOf(text).toCharArray()) {
            if (c == '"' || c == '\\') {
                quoted.append('\\').append(c);
            } else if (c < 0x20) {
                quoted.append(String.format("\\u%04x", (int) c));
            } else {
                quoted.append(c);
            }
        }
        return quoted.append('"').toString();
    }
}
