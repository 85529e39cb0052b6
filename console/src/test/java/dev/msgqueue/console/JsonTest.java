package dev.msgqueue.console;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
  @Test
  void stringsEscapeEverythingThatMeansSomethingInHtmlOrScript() {
    String text = new String(new Json.Writer().startObject()
        .field("v", "</script><img onerror='x'>&\u2028\u2029\"").endObject().bytes(), StandardCharsets.UTF_8);
    assertThat(text).doesNotContain("<", ">", "&", "'", "\u2028", "\u2029")
        .contains("\\u003C/script\\u003E", "\\u0026", "\\u0027", "\\u2028", "\\u2029", "\\\"");
  }

  @Test
  void aRequestBodyIsOneObjectOfStringsNumbersAndArraysOfIntegers() {
    Map<String, Object> body = Json.readObject("{\"queue\": \"q\", \"ids\": [1, 2], \"n\": 3, \"b\": true}"
        .getBytes(StandardCharsets.UTF_8));
    assertThat(body).containsEntry("queue", "q").containsEntry("ids", List.of(1L, 2L)).containsEntry("n", 3L)
        .containsEntry("b", true);
    assertThatThrownBy(() -> Json.readObject("[1]".getBytes(StandardCharsets.UTF_8))).isInstanceOf(ApiError.class);
    assertThatThrownBy(() -> Json.readObject("{\"ids\": [\"1\"]}".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(ApiError.class);
    assertThatThrownBy(() -> Json.readObject("{} {}".getBytes(StandardCharsets.UTF_8))).isInstanceOf(ApiError.class);
    assertThatThrownBy(() -> Json.readObject("{\"a\": {}}".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(ApiError.class);
  }
}
