// libcurl's option and information calls are variadic, which Swift cannot call: each wrapper below fixes one
// argument type. Nothing else is added; everything else of libcurl is used as it is.
#ifndef CSESSIONKITCURL_SHIM_H
#define CSESSIONKITCURL_SHIM_H

#include <curl/curl.h>
// The event loop that drives libcurl's multi interface; Swift's Glibc module has neither header.
#include <sys/epoll.h>
#include <sys/eventfd.h>

typedef size_t (*sk_curl_data_callback)(char *, size_t, size_t, void *);
typedef int (*sk_curl_socket_callback)(CURL *, curl_socket_t, int, void *, void *);
typedef int (*sk_curl_timer_callback)(CURLM *, long, void *);
typedef int (*sk_curl_xferinfo_callback)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t);

static inline CURLcode sk_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_setopt_data_callback(
    CURL *handle, CURLoption option, sk_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_setopt_xferinfo_callback(CURL *handle, sk_curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

static inline CURLcode sk_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode sk_curl_easy_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode sk_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode sk_curl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode sk_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode sk_curl_multi_setopt_socket_callback(CURLM *multi, sk_curl_socket_callback value) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, value);
}

static inline CURLMcode sk_curl_multi_setopt_timer_callback(CURLM *multi, sk_curl_timer_callback value) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, value);
}

static inline CURLSHcode sk_curl_share_setopt_long(CURLSH *share, CURLSHoption option, long value) {
    return curl_share_setopt(share, option, value);
}

/// CURLMsg's `data` is a union; Swift reads the result member through this.
static inline CURLcode sk_curl_msg_result(const CURLMsg *message) { return message->data.result; }

#endif
