from django.urls import include, path

from . import views

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("api/me", views.MeView.as_view(), name="api-me"),
    path("test/health", views.health),
    path("test/log", views.log),
    path("test/log/clear", views.clear_log),
    path("test/control", views.control),
    path("test/users", views.create_user),
    path("test/login", views.login_session),
    path("test/device/approve", views.approve_device),
    path("test/tokens/expire", views.expire_access_token),
    path("test/revoke_user", views.revoke_user),
]
