#!/bin/sh
# Makes an MPI image's sshd run as the non-root user USER (uid 1000) and its ssh client reach it, with the
# key pair the MPIJob controller mounts from the job's Secret at sshAuthMountPath (~USER/.ssh: id_rsa,
# id_rsa.pub, authorized_keys; root-owned, mode 0644, in a directory that may be world-writable, hence
# StrictModes no). An unprivileged sshd cannot bind port 22, so server and client agree on 2222. The host
# keys are made at build time and owned by USER (every container of the image shares them; clients do not
# check them: pods are ephemeral and addressed by name). Usage: setup-sshd.sh USER [NAME=VALUE...], where
# the pairs are env that every SSH session (so every remotely started rank) gets.
set -eu
user=$1
shift
home=/home/$user
useradd --uid 1000 --create-home --shell /bin/bash "$user"
rm -f /etc/ssh/ssh_host_*
mkdir -p "$home/.sshd" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$home/.sshd/ssh_host_ed25519_key"
ssh-keygen -q -t rsa -b 3072 -N '' -f "$home/.sshd/ssh_host_rsa_key"
setenv="PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"
for pair in "$@"; do setenv="$setenv $pair"; done
cat >/etc/ssh/sshd_config <<CONF
Port 2222
HostKey $home/.sshd/ssh_host_ed25519_key
HostKey $home/.sshd/ssh_host_rsa_key
PidFile none
UsePAM no
StrictModes no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $user
SetEnv $setenv
Subsystem sftp internal-sftp
CONF
cp /etc/ssh/sshd_config "$home/.sshd_config"
cat >/etc/ssh/ssh_config.d/kubetrain.conf <<CONF
Host *
    Port 2222
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    ConnectionAttempts 10
CONF
chown -R "$user:$user" "$home"
chmod 700 "$home/.sshd"
