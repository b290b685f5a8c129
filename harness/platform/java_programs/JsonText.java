// JSON text for the harness's Java programs (the admin program, the recorder, the consumer-group
// member), compiled beside each of them: they print JSON lines by hand, so that no JSON library
// has to match every kafka-clients release they are built against.

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

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

    /** `values` as a JSON object of strings, keys sorted (a client's resolved configuration). */
    static String object(Map<String, ?> values) {
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, ?> entry : new TreeMap<>(values).entrySet()) {
            if (json.length() > 1) {
                json.append(',');
            }
            json.append(quote(entry.getKey())).append(':').append(quote(String.valueOf(entry.getValue())));
        }
        return json.append('}').toString();
    }

    /** The configuration `props` resolves to in the client's `configClass` (ProducerConfig,
     *  ConsumerConfig: the client's defaults filled in), as a JSON object; {} when this
     *  release's class cannot be built from a map (its constructor is not public in all). */
    static String resolvedConfig(Class<?> configClass, Map<?, ?> props) {
        Map<String, ?> values;
        try {
            java.lang.reflect.Constructor<?> make = configClass.getDeclaredConstructor(Map.class);
            make.setAccessible(true);
            Object config = make.newInstance(new HashMap<Object, Object>(props));
            @SuppressWarnings("unchecked")
            Map<String, ?> resolved = (Map<String, ?>) configClass.getMethod("values").invoke(config);
            values = resolved;
        } catch (Exception e) {
            values = new HashMap<>();
        }
        return object(values);
    }
}
