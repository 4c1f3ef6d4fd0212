//! Reading what the broker answers a browser: a redirect's `Location`, a query value encoded as
//! a form would, and the fields of a page's forms.

pub fn location(response: &reqwest::Response) -> String {
    response.headers().get("location").expect("a Location header").to_str().unwrap().to_owned()
}

pub fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// The value of `<input … name="NAME" … value="VALUE">` in a page.
pub fn hidden_field(html: &str, name: &str) -> Option<String> {
    hidden_fields(html).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// All `<input name=… value=…>` pairs of a page (attribute order-insensitive).
pub fn hidden_fields(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for tag in html.split("<input").skip(1) {
        let tag = tag.split('>').next().unwrap_or_default();
        let attr = |attr: &str| {
            let key = format!("{attr}=\"");
            tag.find(&key).map(|i| {
                let rest = &tag[i + key.len()..];
                html_unescape(&rest[..rest.find('"').unwrap_or(rest.len())])
            })
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            out.push((name, value));
        }
    }
    out
}

fn html_unescape(value: &str) -> String {
    value
        .replace("&#x2f;", "/")
        .replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
